// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(top-const-fold,canonicalize,top-shape-infer))' --mlir-print-op-generic | FileCheck %s

// Tensors far larger than memory get their static types without being allocated (shape inference
// has closed forms for ConstantOfShape/Expand/Tile) and are not constant-folded; the interpreter
// refuses to run them (tests/execution).
// CHECK-LABEL: sym_name = "huge"
// CHECK: "top.ConstantOfShape"{{.*}} -> tensor<100000x100000x1000xf32>
// CHECK: "top.Expand"{{.*}} -> tensor<100000x100000x1000xf32>
// CHECK: "top.Tile"{{.*}} -> tensor<100000x100000x1000xf32>
func.func @huge(%x: tensor<1xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %in = "top.Input"(%x) : (tensor<1xf32>) -> tensor<1xf32>
  %s = "top.Weight"() <{value = dense<[100000, 100000, 1000]> : tensor<3xi64>}> : () -> tensor<3xi64>
  %c = "top.ConstantOfShape"(%s) <{value = dense<1.0> : tensor<1xf32>}> : (tensor<3xi64>) -> tensor<*xf32>
  %e = "top.Expand"(%in, %s) : (tensor<1xf32>, tensor<3xi64>) -> tensor<*xf32>
  %one = "top.Weight"() <{value = dense<1.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %t = "top.Tile"(%one, %s) : (tensor<1x1x1xf32>, tensor<3xi64>) -> tensor<*xf32>
  return %c, %e, %t : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// The same ops on small shapes are evaluated (and folded where constant) as before.
// CHECK-LABEL: sym_name = "small"
// CHECK-NOT: "top.ConstantOfShape"
// CHECK: "top.Expand"{{.*}} -> tensor<2x3xf32>
// CHECK: "top.Add"{{.*}} -> tensor<2x3xf32>
func.func @small(%x: tensor<1xf32>) -> tensor<*xf32> {
  %in = "top.Input"(%x) : (tensor<1xf32>) -> tensor<1xf32>
  %s = "top.Weight"() <{value = dense<[2, 3]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %c = "top.ConstantOfShape"(%s) <{value = dense<1.0> : tensor<1xf32>}> : (tensor<2xi64>) -> tensor<*xf32>
  %e = "top.Expand"(%in, %s) : (tensor<1xf32>, tensor<2xi64>) -> tensor<*xf32>
  %a = "top.Add"(%c, %e) : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  return %a : tensor<*xf32>
}
