// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-op-generic --mlir-print-debuginfo | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(top-canonicalize))' --mlir-print-op-generic --mlir-print-debuginfo | FileCheck %s

// BatchNorm folds into the Conv before it: W' = W * s, b' = (b - mean) * s + beta with
// s = gamma / sqrt(var + eps) = [4, 2] / sqrt([3, 15] + 1) = [2, 0.5]; b' = -[1, 2] * s + [1, 0] = [-1, -1].
// The fused Conv produces the BatchNorm's tensor, so it takes its location.
// CHECK-LABEL: sym_name = "bn_into_conv"
// CHECK-DAG: %[[W:.*]] = "top.Weight"() <{value = dense_resource<[[WK:bn_filter]]> : tensor<2x1x1x1xf32>}>
// CHECK-DAG: %[[B:.*]] = "top.Weight"() <{value = dense_resource<[[BK:bn_bias]]> : tensor<2xf32>}>
// CHECK: %[[C:.*]] = "top.Conv"(%{{.*}}, %[[W]], %[[B]]) <{group = 2 : i64}> : {{.*}} loc(#[[BNLOC:loc[0-9]+]])
// CHECK-NOT: "top.BatchNorm"
// CHECK: "func.return"(%[[C]])
func.func @bn_into_conv(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %in = "top.Input"(%x) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %w = "top.Weight"() <{value = dense<1.0> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %n = "top.None"() : () -> none
  %c = "top.Conv"(%in, %w, %n) <{group = 2 : i64}> : (tensor<1x2x4x4xf32>, tensor<2x1x1x1xf32>, none) -> tensor<1x2x4x4xf32> loc("conv")
  %g = "top.Weight"() <{value = dense<[4.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %b = "top.Weight"() <{value = dense<[1.0, 0.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %m = "top.Weight"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %v = "top.Weight"() <{value = dense<[3.0, 15.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %y = "top.BatchNorm"(%c, %g, %b, %m, %v) <{epsilon = 1.0 : f64}> : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32> loc("bn")
  return %y : tensor<1x2x4x4xf32>
}

// Not fused: the Conv result has another use.
// CHECK-LABEL: sym_name = "conv_two_uses"
// CHECK: "top.Conv"
// CHECK: "top.BatchNorm"
func.func @conv_two_uses(%x: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  %in = "top.Input"(%x) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %w = "top.Weight"() <{value = dense<1.0> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %n = "top.None"() : () -> none
  %c = "top.Conv"(%in, %w, %n) <{group = 2 : i64}> : (tensor<1x2x4x4xf32>, tensor<2x1x1x1xf32>, none) -> tensor<1x2x4x4xf32>
  %g = "top.Weight"() <{value = dense<[4.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %y = "top.BatchNorm"(%c, %g, %g, %g, %g) : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  return %y, %c : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}

// CHECK: #[[BNLOC]] = loc("bn")
// CHECK-DAG: [[WK]]: "0x10000000000000400000003F"
// CHECK-DAG: [[BK]]: "0x10000000000080BF000080BF"
