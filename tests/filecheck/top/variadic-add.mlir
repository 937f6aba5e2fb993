// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-op-generic | FileCheck %s

// An ONNX Sum of one tensor (a top.Add with one operand) feeding a mean subtraction: the patterns
// for commutative binary ops do not apply to it (they raised IndexError).
// CHECK-LABEL: sym_name = "sum_one"
// CHECK: "top.Add"(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: "top.Sub"
func.func @sum_one(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %axes = "top.Weight"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %in = "top.Input"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %s = "top.Add"(%in) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %m = "top.Reduce"(%s, %axes) <{mode = "ReduceMean"}> : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<2x1xf32>
  %y = "top.Sub"(%s, %m) : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
