// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(top-const-fold))' --mlir-print-op-generic | FileCheck %s

// A whole constant subgraph (Mul then Relu of weights) becomes one weight: [2, 4, 6, 8, 10, 12].
// CHECK-LABEL: sym_name = "fold_chain"
// CHECK: %[[W:.*]] = "top.Weight"() <{value = dense_resource<[[KEY:relu]]> : tensor<2x3xf32>}>
// CHECK-NOT: "top.Mul"
// CHECK-NOT: "top.Relu"
// CHECK: "func.return"(%[[W]])
func.func @fold_chain() -> tensor<2x3xf32> {
  %a = "top.Weight"() <{value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>}> : () -> tensor<2x3xf32>
  %b = "top.Weight"() <{value = dense<2.0> : tensor<3xf32>}> : () -> tensor<3xf32>
  %0 = "top.Mul"(%a, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = "top.Relu"(%0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// Shape of a static tensor is constant: Shape -> Gather -> Concat folds and Reshape reads a weight.
// CHECK-LABEL: sym_name = "shape_chain"
// CHECK: %[[S:.*]] = "top.Weight"() <{value = dense_resource<{{.*}}> : tensor<2xi64>}>
// CHECK-NOT: "top.Shape"
// CHECK-NOT: "top.Gather"
// CHECK-NOT: "top.Concat"
// CHECK: "top.Reshape"(%{{.*}}, %[[S]]) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
func.func @shape_chain(%x: tensor<2x3x4xf32>) -> tensor<2x12xf32> {
  %in = "top.Input"(%x) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %s = "top.Shape"(%in) : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %i = "top.Weight"() <{value = dense<0> : tensor<1xi64>}> : () -> tensor<1xi64>
  %g = "top.Gather"(%s, %i) <{axis = 0 : i64}> : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %m = "top.Weight"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %c = "top.Concat"(%g, %m) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %r = "top.Reshape"(%in, %c) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
  return %r : tensor<2x12xf32>
}

// A static dim gathered out of the shape of a partially dynamic tensor is constant too.
// CHECK-LABEL: sym_name = "partial_shape"
// CHECK: "top.Weight"() <{value = dense_resource<{{.*}}> : tensor<1xi64>}>
// CHECK-NOT: "top.Gather"
func.func @partial_shape(%x: tensor<?x8xf32>) -> tensor<1xi64> {
  %in = "top.Input"(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %s = "top.Shape"(%in) : (tensor<?x8xf32>) -> tensor<2xi64>
  %i = "top.Weight"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %g = "top.Gather"(%s, %i) <{axis = 0 : i64}> : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  return %g : tensor<1xi64>
}

// Ops reading a non-constant value, and a dynamic dim, stay.
// CHECK-LABEL: sym_name = "not_constant"
// CHECK: "top.Shape"
// CHECK: "top.Gather"
// CHECK: "top.Add"
func.func @not_constant(%x: tensor<?x8xf32>) -> (tensor<1xi64>, tensor<?x8xf32>) {
  %in = "top.Input"(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %s = "top.Shape"(%in) : (tensor<?x8xf32>) -> tensor<2xi64>
  %i = "top.Weight"() <{value = dense<0> : tensor<1xi64>}> : () -> tensor<1xi64>
  %g = "top.Gather"(%s, %i) <{axis = 0 : i64}> : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %w = "top.Weight"() <{value = dense<1.0> : tensor<8xf32>}> : () -> tensor<8xf32>
  %a = "top.Add"(%in, %w) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return %g, %a : tensor<1xi64>, tensor<?x8xf32>
}

// The folded values are in the resource section: 2, 4, ..., 12 as f32.
// CHECK: dialect_resources
// CHECK: [[KEY]]: "0x1000000000000040000080400000C040000000410000204100004041"
