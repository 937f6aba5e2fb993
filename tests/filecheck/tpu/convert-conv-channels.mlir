// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8})' --mlir-print-op-generic | FileCheck %s

// Rank-4 outlier channels (docs/tpu.md "Rank-4 (convolutional) activations"): the conv's result is
// per-channel along axis 1 (channel 1 is 40x the others), the Mul by a scalar keeps it per channel
// with one multiplier and shift per channel, and the depthwise conv reading it folds the scales
// into its filter; its own result (no #channel_th) is per-tensor. No requant in between.
// CHECK: "tpu.Conv"({{.*}}) <{multiplier = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}>, rshift = array<i64: {{.*}}>}>{{.*}} -> tensor<1x3x4x4x!quant.uniform<i8:f32:1, {0.0078{{[0-9]*}},0.3149{{[0-9]*}},0.0078{{[0-9]*}}}>>
// CHECK: "tpu.Mul"({{.*}}) <{multiplier = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}>, rshift = array<i64: {{-?[0-9]+}}, {{-?[0-9]+}}, {{-?[0-9]+}}>}>{{.*}} -> tensor<1x3x4x4x!quant.uniform<i8:f32:1, {0.0157{{[0-9]*}},0.6299{{[0-9]*}},0.0157{{[0-9]*}}}>>
// CHECK: "tpu.Conv"({{.*}}) <{group = 3 : i64, multiplier = {{.*}}}> : (tensor<1x3x4x4x!quant.uniform<i8:f32:1, {{.*}}>>, tensor<3x1x1x1x!quant.uniform<i8<-127:127>:f32:0, {{.*}}>>, none) -> tensor<1x3x4x4x!quant.uniform<i8:f32, 0.0157{{[0-9]*}}>>
// CHECK-NOT: "tpu.Requant"
func.func @main(%x: tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x3x4x4x!quant.calibrated<f32<-2.0:2.0>>> {
  %in = "top.Input"(%x) : (tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %w = "top.Weight"() <{value = dense<[[[[0.5]], [[-0.25]]], [[[20.0]], [[10.0]]], [[[0.25]], [[0.5]]]]> : tensor<3x2x1x1xf32>}> : () -> tensor<3x2x1x1xf32>
  %nb = "top.None"() : () -> none
  %c = "top.Conv"(%in, %w, %nb) {lamina.channel_axis = 1 : i64, lamina.channel_th = dense<[1.0, 40.0, 1.0]> : tensor<3xf32>} : (tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>>, tensor<3x2x1x1xf32>, none) -> tensor<1x3x4x4x!quant.calibrated<f32<-40.0:40.0>>> loc("conv")
  %s = "top.Weight"() <{value = dense<2.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %m = "top.Mul"(%c, %s) {lamina.channel_axis = 1 : i64, lamina.channel_th = dense<[2.0, 80.0, 2.0]> : tensor<3xf32>} : (tensor<1x3x4x4x!quant.calibrated<f32<-40.0:40.0>>>, tensor<1xf32>) -> tensor<1x3x4x4x!quant.calibrated<f32<-80.0:80.0>>> loc("mul")
  %dw = "top.Weight"() <{value = dense<[[[[1.0]]], [[[0.025]]], [[[1.0]]]]> : tensor<3x1x1x1xf32>}> : () -> tensor<3x1x1x1xf32>
  %d = "top.Conv"(%m, %dw, %nb) <{group = 3 : i64}> : (tensor<1x3x4x4x!quant.calibrated<f32<-80.0:80.0>>>, tensor<3x1x1x1xf32>, none) -> tensor<1x3x4x4x!quant.calibrated<f32<-2.0:2.0>>> loc("dw")
  return %d : tensor<1x3x4x4x!quant.calibrated<f32<-2.0:2.0>>>
}
