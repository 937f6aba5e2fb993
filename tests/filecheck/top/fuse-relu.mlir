// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-op-generic --mlir-print-debuginfo | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(top-canonicalize))' --mlir-print-op-generic --mlir-print-debuginfo | FileCheck %s

// Relu after Conv becomes do_relu; the Conv takes the Relu's location (it now produces its tensor).
// CHECK-LABEL: sym_name = "relu_conv"
// CHECK: %[[C:.*]] = "top.Conv"({{.*}}) <{do_relu = true}> : {{.*}} loc(#[[RL:loc[0-9]*]])
// CHECK-NOT: "top.Relu"
// CHECK: "func.return"(%[[C]])
func.func @relu_conv(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %in = "top.Input"(%x) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %w = "top.Weight"() <{value = dense<1.0> : tensor<2x2x1x1xf32>}> : () -> tensor<2x2x1x1xf32>
  %n = "top.None"() : () -> none
  %c = "top.Conv"(%in, %w, %n) : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x4x4xf32> loc("conv")
  %r = "top.Relu"(%c) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("relu")
  return %r : tensor<1x2x4x4xf32>
}

// Relu after MatMul, and a second Relu (idempotent), disappear.
// CHECK-LABEL: sym_name = "relu_matmul"
// CHECK: %[[M:.*]] = "top.MatMul"({{.*}}) <{do_relu = true}>
// CHECK-NOT: "top.Relu"
// CHECK: "func.return"(%[[M]])
func.func @relu_matmul(%x: tensor<3x4xf32>) -> tensor<3x5xf32> {
  %in = "top.Input"(%x) : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %w = "top.Weight"() <{value = dense<0.5> : tensor<4x5xf32>}> : () -> tensor<4x5xf32>
  %n = "top.None"() : () -> none
  %m = "top.MatMul"(%in, %w, %n) : (tensor<3x4xf32>, tensor<4x5xf32>, none) -> tensor<3x5xf32>
  %r = "top.Relu"(%m) : (tensor<3x5xf32>) -> tensor<3x5xf32>
  %r2 = "top.Relu"(%r) : (tensor<3x5xf32>) -> tensor<3x5xf32>
  return %r2 : tensor<3x5xf32>
}

// Clip(0, 6) (ReLU6) becomes do_relu with relu_limit.
// CHECK-LABEL: sym_name = "relu6_conv"
// CHECK: %[[C:.*]] = "top.Conv"({{.*}}) <{do_relu = true, relu_limit = 6.000000e+00 : f64}>
// CHECK-NOT: "top.Clip"
// CHECK: "func.return"(%[[C]])
func.func @relu6_conv(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %in = "top.Input"(%x) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %w = "top.Weight"() <{value = dense<1.0> : tensor<2x2x1x1xf32>}> : () -> tensor<2x2x1x1xf32>
  %n = "top.None"() : () -> none
  %c = "top.Conv"(%in, %w, %n) : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x4x4xf32>
  %lo = "top.Weight"() <{value = dense<0.0> : tensor<f32>}> : () -> tensor<f32>
  %hi = "top.Weight"() <{value = dense<6.0> : tensor<f32>}> : () -> tensor<f32>
  %r = "top.Clip"(%c, %lo, %hi) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  return %r : tensor<1x2x4x4xf32>
}

// A Clip with a non-zero lower bound is not a relu.
// CHECK-LABEL: sym_name = "clip_not_relu"
// CHECK: "top.Clip"
func.func @clip_not_relu(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %in = "top.Input"(%x) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %w = "top.Weight"() <{value = dense<1.0> : tensor<2x2x1x1xf32>}> : () -> tensor<2x2x1x1xf32>
  %n = "top.None"() : () -> none
  %c = "top.Conv"(%in, %w, %n) : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x4x4xf32>
  %lo = "top.Weight"() <{value = dense<-1.0> : tensor<f32>}> : () -> tensor<f32>
  %hi = "top.Weight"() <{value = dense<6.0> : tensor<f32>}> : () -> tensor<f32>
  %r = "top.Clip"(%c, %lo, %hi) : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  return %r : tensor<1x2x4x4xf32>
}

// Gemm with transB and alpha/beta becomes a MatMul on the transposed, scaled weight, then Relu fuses.
// CHECK-LABEL: sym_name = "gemm_relu"
// CHECK-DAG: %[[W:.*]] = "top.Weight"() <{value = dense_resource<{{.*}}> : tensor<4x5xf32>}>
// CHECK-DAG: %[[B:.*]] = "top.Weight"() <{value = dense_resource<{{.*}}> : tensor<5xf32>}>
// CHECK: %[[M:.*]] = "top.MatMul"(%{{.*}}, %[[W]], %[[B]]) <{do_relu = true}>
// CHECK-NOT: "top.Gemm"
// CHECK-NOT: "top.Relu"
// CHECK: "func.return"(%[[M]])
func.func @gemm_relu(%x: tensor<3x4xf32>) -> tensor<3x5xf32> {
  %in = "top.Input"(%x) : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %w = "top.Weight"() <{value = dense<0.5> : tensor<5x4xf32>}> : () -> tensor<5x4xf32>
  %b = "top.Weight"() <{value = dense<1.0> : tensor<5xf32>}> : () -> tensor<5xf32>
  %g = "top.Gemm"(%in, %w, %b) <{alpha = 2.0 : f64, beta = 0.5 : f64, transB = 1 : i64}> : (tensor<3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<3x5xf32>
  %r = "top.Relu"(%g) : (tensor<3x5xf32>) -> tensor<3x5xf32>
  return %r : tensor<3x5xf32>
}

// CHECK: #[[RL]] = loc("relu")
