// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-op-generic | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(top-canonicalize))' --mlir-print-op-generic | FileCheck %s

// PyTorch's LayerNorm export before opset 17: ReduceMean / Sub / Pow / ReduceMean / Add / Sqrt /
// Div / Mul / Add over the last axis.
// CHECK-LABEL: sym_name = "layernorm"
// CHECK-DAG: %[[G:.*]] = "top.Weight"() <{value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>}>
// CHECK-DAG: %[[B:.*]] = "top.Weight"() <{value = dense<5.000000e-01> : tensor<4xf32>}>
// CHECK-DAG: %[[X:.*]] = "top.Input"
// CHECK: %[[L:.*]]:3 = "top.LayerNorm"(%[[X]], %[[G]], %[[B]]) <{axis = 2 : i64, epsilon = 1.000000e-05 : f64}> : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, none, none)
// CHECK-NOT: "top.Reduce"
// CHECK-NOT: "top.Sqrt"
// CHECK: "func.return"(%[[L]]#0)
func.func @layernorm(%a: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %x = "top.Input"(%a) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %ax = "top.Weight"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %two = "top.Weight"() <{value = dense<2.0> : tensor<f32>}> : () -> tensor<f32>
  %eps = "top.Weight"() <{value = dense<1.0e-05> : tensor<f32>}> : () -> tensor<f32>
  %g = "top.Weight"() <{value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>}> : () -> tensor<4xf32>
  %b = "top.Weight"() <{value = dense<0.5> : tensor<4xf32>}> : () -> tensor<4xf32>
  %m = "top.Reduce"(%x, %ax) <{mode = "ReduceMean"}> : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<2x3x1xf32>
  %d = "top.Sub"(%x, %m) : (tensor<2x3x4xf32>, tensor<2x3x1xf32>) -> tensor<2x3x4xf32>
  %p = "top.Pow"(%d, %two) : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %v = "top.Reduce"(%p, %ax) <{mode = "ReduceMean"}> : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<2x3x1xf32>
  %ve = "top.Add"(%v, %eps) : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %sd = "top.Sqrt"(%ve) : (tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %n = "top.Div"(%d, %sd) : (tensor<2x3x4xf32>, tensor<2x3x1xf32>) -> tensor<2x3x4xf32>
  %w = "top.Mul"(%n, %g) : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %y = "top.Add"(%w, %b) : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// Without the affine part, over the last two axes (axis = 1), with d * d for the square:
// the weight is ones of the normalized shape.
// CHECK-LABEL: sym_name = "layernorm_plain"
// CHECK: %[[W:.*]] = "top.Weight"() <{value = dense_resource<{{.*}}> : tensor<3x4xf32>}>
// CHECK: "top.LayerNorm"(%{{.*}}, %[[W]], %{{.*}}) <{axis = 1 : i64, epsilon = 1.000000e-03 : f64}>
// CHECK-NOT: "top.Div"
func.func @layernorm_plain(%a: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %x = "top.Input"(%a) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %ax = "top.Weight"() <{value = dense<[1, 2]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %eps = "top.Weight"() <{value = dense<1.0e-03> : tensor<f64>}> : () -> tensor<f64>
  %m = "top.Reduce"(%x, %ax) <{mode = "ReduceMean"}> : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x1x1xf32>
  %d = "top.Sub"(%x, %m) : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
  %p = "top.Mul"(%d, %d) : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %v = "top.Reduce"(%p, %ax) <{mode = "ReduceMean"}> : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x1x1xf32>
  %ve = "top.Add"(%eps, %v) : (tensor<f64>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %sd = "top.Sqrt"(%ve) : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %n = "top.Div"(%d, %sd) : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
  return %n : tensor<2x3x4xf32>
}

// Not a LayerNorm: the reduction is over a leading axis.
// CHECK-LABEL: sym_name = "not_layernorm"
// CHECK-NOT: "top.LayerNorm"
// CHECK: "top.Reduce"
func.func @not_layernorm(%a: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %x = "top.Input"(%a) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %ax = "top.Weight"() <{value = dense<0> : tensor<1xi64>}> : () -> tensor<1xi64>
  %eps = "top.Weight"() <{value = dense<1.0e-05> : tensor<f32>}> : () -> tensor<f32>
  %m = "top.Reduce"(%x, %ax) <{mode = "ReduceMean"}> : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<1x3x4xf32>
  %d = "top.Sub"(%x, %m) : (tensor<2x3x4xf32>, tensor<1x3x4xf32>) -> tensor<2x3x4xf32>
  %p = "top.Mul"(%d, %d) : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %v = "top.Reduce"(%p, %ax) <{mode = "ReduceMean"}> : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<1x3x4xf32>
  %ve = "top.Add"(%v, %eps) : (tensor<1x3x4xf32>, tensor<f32>) -> tensor<1x3x4xf32>
  %sd = "top.Sqrt"(%ve) : (tensor<1x3x4xf32>) -> tensor<1x3x4xf32>
  %n = "top.Div"(%d, %sd) : (tensor<2x3x4xf32>, tensor<1x3x4xf32>) -> tensor<2x3x4xf32>
  return %n : tensor<2x3x4xf32>
}
