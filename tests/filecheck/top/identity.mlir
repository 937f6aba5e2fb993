// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-op-generic | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(top-canonicalize))' --mlir-print-op-generic | FileCheck %s

// Identity, inference Dropout, a Reshape / Squeeze to the same shape, an identity Permute and a
// Cast to the same type all forward their input.
// CHECK-LABEL: sym_name = "identities"
// CHECK: ^bb0(%[[A:.*]]: tensor<2x3xf32>):
// CHECK-NEXT: %[[X:.*]] = "top.Input"(%[[A]])
// CHECK-NEXT: "func.return"(%[[X]], %[[X]])
func.func @identities(%a: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %x = "top.Input"(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %0 = "top.Identity"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %n = "top.None"() : () -> none
  %1, %mask = "top.Dropout"(%0, %n, %n) : (tensor<2x3xf32>, none, none) -> (tensor<2x3xf32>, none)
  %s = "top.Weight"() <{value = dense<[2, 3]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %2 = "top.Reshape"(%1, %s) : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %3 = "top.Permute"(%2) <{order = array<i64: 0, 1>}> : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = "top.Cast"(%3) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = "top.Squeeze"(%x, %n) : (tensor<2x3xf32>, none) -> tensor<2x3xf32>
  return %4, %5 : tensor<2x3xf32>, tensor<2x3xf32>
}

// Not identities: a real transpose, a Cast that changes the element type, a training Dropout.
// CHECK-LABEL: sym_name = "not_identities"
// CHECK: "top.Permute"
// CHECK: "top.Cast"
// CHECK: "top.Dropout"
func.func @not_identities(%a: tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3x3xf16>, tensor<3x3xf32>) {
  %x = "top.Input"(%a) : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %0 = "top.Permute"(%x) <{order = array<i64: 1, 0>}> : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %1 = "top.Cast"(%x) : (tensor<3x3xf32>) -> tensor<3x3xf16>
  %n = "top.None"() : () -> none
  %t = "top.Weight"() <{value = dense<true> : tensor<i1>}> : () -> tensor<i1>
  %2, %mask = "top.Dropout"(%x, %n, %t) : (tensor<3x3xf32>, none, tensor<i1>) -> (tensor<3x3xf32>, none)
  return %0, %1, %2 : tensor<3x3xf32>, tensor<3x3xf16>, tensor<3x3xf32>
}
