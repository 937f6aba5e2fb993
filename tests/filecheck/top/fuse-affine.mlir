// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-op-generic --mlir-print-debuginfo | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(top-canonicalize))' --mlir-print-op-generic --mlir-print-debuginfo | FileCheck %s

// A scalar Mul then a per-channel Add after a Conv (PP-OCRv4's learnable affine blocks) fold into
// its weights and bias: W' = W * 2, b' = [1, 2] * 2 + [0.5, -1] = [2.5, 3]. The Conv takes the
// location of the last op, whose tensor it produces.
// CHECK-LABEL: sym_name = "affine_into_conv"
// CHECK-DAG: %[[W:.*]] = "top.Weight"() <{value = dense_resource<[[WK:scale_filter]]> : tensor<2x1x1x1xf32>}>
// CHECK-DAG: %[[B:.*]] = "top.Weight"() <{value = dense_resource<[[BK:shift_bias]]> : tensor<2xf32>}>
// CHECK: %[[C:.*]] = "top.Conv"(%{{.*}}, %[[W]], %[[B]]) <{group = 2 : i64}> : {{.*}} loc(#[[LOC:loc[0-9]+]])
// CHECK-NOT: "top.Mul"
// CHECK-NOT: "top.Add"
// CHECK: "func.return"(%[[C]])
func.func @affine_into_conv(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %in = "top.Input"(%x) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %w = "top.Weight"() <{value = dense<1.0> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %b = "top.Weight"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %c = "top.Conv"(%in, %w, %b) <{group = 2 : i64}> : (tensor<1x2x4x4xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32> loc("conv")
  %a = "top.Weight"() <{value = dense<2.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %m = "top.Mul"(%a, %c) : (tensor<1xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("scale")
  %k = "top.Weight"() <{value = dense<[[[0.5]], [[-1.0]]]> : tensor<2x1x1xf32>}> : () -> tensor<2x1x1xf32>
  %y = "top.Add"(%m, %k) : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32> loc("shift")
  return %y : tensor<1x2x4x4xf32>
}

// Not fused: the constant varies along a spatial axis; the Conv has a fused Relu; the Conv result
// has another use.
// CHECK-LABEL: sym_name = "not_affine"
// CHECK: "top.Conv"
// CHECK: "top.Add"
// CHECK: "top.Conv"
// CHECK: "top.Mul"
// CHECK: "top.Conv"
// CHECK: "top.Mul"
func.func @not_affine(%x: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  %in = "top.Input"(%x) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %w = "top.Weight"() <{value = dense<1.0> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %n = "top.None"() : () -> none
  %c1 = "top.Conv"(%in, %w, %n) <{group = 2 : i64}> : (tensor<1x2x4x4xf32>, tensor<2x1x1x1xf32>, none) -> tensor<1x2x4x4xf32>
  %sp = "top.Weight"() <{value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>}> : () -> tensor<4xf32>
  %y1 = "top.Add"(%c1, %sp) : (tensor<1x2x4x4xf32>, tensor<4xf32>) -> tensor<1x2x4x4xf32>
  %c2 = "top.Conv"(%in, %w, %n) <{group = 2 : i64, do_relu = true}> : (tensor<1x2x4x4xf32>, tensor<2x1x1x1xf32>, none) -> tensor<1x2x4x4xf32>
  %a = "top.Weight"() <{value = dense<-2.0> : tensor<f32>}> : () -> tensor<f32>
  %y2 = "top.Mul"(%c2, %a) : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %c3 = "top.Conv"(%in, %w, %n) <{group = 2 : i64}> : (tensor<1x2x4x4xf32>, tensor<2x1x1x1xf32>, none) -> tensor<1x2x4x4xf32>
  %y3 = "top.Mul"(%c3, %a) : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  return %y1, %y2, %y3, %c3 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}

// CHECK: #[[LOC]] = loc("shift")
// CHECK-DAG: [[WK]]: "0x100000000000004000000040"
// CHECK-DAG: [[BK]]: "0x1000000000002040{{0+}}4040"
