// RUN: lamina-opt %s --pass-pipeline='builtin.module(dce)' --mlir-print-op-generic | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(canonicalize,cse))' --mlir-print-op-generic | FileCheck %s

// The generic dce (and canonicalize, CSE) erase unused top ops and the weights only they used;
// inputs stay, used or not (top.Input reads the model's input: an effect). top-dce is gone.
// CHECK-LABEL: sym_name = "dce"
// CHECK: "top.Input"
// CHECK: "top.Input"
// CHECK-NOT: "top.Exp"
// CHECK-NOT: dense<2.0
// CHECK: "top.Add"
// CHECK: "func.return"
func.func @dce(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %x = "top.Input"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %unused = "top.Input"(%b) : (tensor<4xf32>) -> tensor<4xf32>
  %w = "top.Weight"() <{value = dense<2.0> : tensor<4xf32>}> : () -> tensor<4xf32>
  %e = "top.Exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %m = "top.Mul"(%e, %w) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %one = "top.Weight"() <{value = dense<1.0> : tensor<4xf32>}> : () -> tensor<4xf32>
  %y = "top.Add"(%x, %one) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
