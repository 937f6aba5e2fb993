// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(top-canonicalize))' --mlir-print-op-generic --mlir-print-debuginfo | FileCheck %s

// A constant bias added to a MatMul (ONNX exports Linear as MatMul + Add) becomes the MatMul's
// bias operand; the fused MatMul produces the Add's tensor, so it takes its location.
// CHECK-LABEL: sym_name = "bias_into_matmul"
// CHECK: %[[B:.*]] = "top.Weight"() <{value = dense_resource<[[BK:fc_bias]]> : tensor<3xf32>}>
// CHECK: %[[M:.*]] = "top.MatMul"(%{{.*}}, %{{.*}}, %[[B]]) : {{.*}} loc(#[[ADDLOC:loc[0-9]*]])
// CHECK-NOT: "top.Add"
// CHECK: "func.return"(%[[M]])
func.func @bias_into_matmul(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %in = "top.Input"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %w = "top.Weight"() <{value = dense<1.0> : tensor<4x3xf32>}> : () -> tensor<4x3xf32>
  %n = "top.None"() : () -> none
  %m = "top.MatMul"(%in, %w, %n) : (tensor<2x4xf32>, tensor<4x3xf32>, none) -> tensor<2x3xf32> loc("mm")
  %b = "top.Weight"() <{value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>}> : () -> tensor<3xf32>
  %y = "top.Add"(%b, %m) : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> loc("fc")
  return %y : tensor<2x3xf32>
}

// A MatMul that already has a bias gets the sum ([1, 1, 1] + [1, 2, 3] = [2, 3, 4]).
// CHECK-LABEL: sym_name = "bias_sum"
// CHECK: "top.Weight"() <{value = dense_resource<[[SK:fc2_bias]]> : tensor<3xf32>}>
// CHECK: "top.MatMul"
// CHECK-NOT: "top.Add"
func.func @bias_sum(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %in = "top.Input"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %w = "top.Weight"() <{value = dense<1.0> : tensor<4x3xf32>}> : () -> tensor<4x3xf32>
  %b0 = "top.Weight"() <{value = dense<1.0> : tensor<3xf32>}> : () -> tensor<3xf32>
  %m = "top.MatMul"(%in, %w, %b0) : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %b = "top.Weight"() <{value = dense<[[1.0, 2.0, 3.0]]> : tensor<1x3xf32>}> : () -> tensor<1x3xf32>
  %y = "top.Add"(%m, %b) : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32> loc("fc2")
  return %y : tensor<2x3xf32>
}

// Not fused: the addend varies along the rows (not a bias), or the MatMul result has another use.
// CHECK-LABEL: sym_name = "not_a_bias"
// CHECK: "top.MatMul"
// CHECK: "top.Add"
// CHECK: "top.MatMul"
// CHECK: "top.Add"
func.func @not_a_bias(%x: tensor<2x4xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %in = "top.Input"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %w = "top.Weight"() <{value = dense<1.0> : tensor<4x3xf32>}> : () -> tensor<4x3xf32>
  %n = "top.None"() : () -> none
  %m = "top.MatMul"(%in, %w, %n) : (tensor<2x4xf32>, tensor<4x3xf32>, none) -> tensor<2x3xf32>
  %r = "top.Weight"() <{value = dense<[[1.0], [2.0]]> : tensor<2x1xf32>}> : () -> tensor<2x1xf32>
  %y = "top.Add"(%m, %r) : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  %m2 = "top.MatMul"(%in, %w, %n) : (tensor<2x4xf32>, tensor<4x3xf32>, none) -> tensor<2x3xf32>
  %b = "top.Weight"() <{value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>}> : () -> tensor<3xf32>
  %z = "top.Add"(%m2, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %y, %z, %m2 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// CHECK: #[[ADDLOC]] = loc("fc")
// Blobs: alignment 16, then little-endian float32: [1, 2, 3] and [2, 3, 4].
// CHECK: [[BK]]: "0x100000000000803F0000004000004040"
// CHECK: [[SK]]: "0x10000000000000400000404000008040"
