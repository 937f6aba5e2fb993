// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=F32},convert-tpu-to-cpu,cpu-arena-alloc)' | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-cpu,cpu-arena-alloc)' | FileCheck %s --check-prefix=INT8

// Residual fusion: an Add of a conv's result and a tensor computed before the conv's kernel runs
// moves into that kernel (then the ReLU after it). Block 1: conv2(conv1(x)) + x: the add and its
// ReLU fuse into conv2 (x is a model input). Block 2: the residual %d, a downsample conv, comes
// after conv4 in the block: the add cannot be conv4's (%d is not computed yet), it fuses into %d's
// kernel, whose other input is conv4's result. Liveness keeps each residual until the fused kernel
// has read it: the fused kernel's result never shares bytes with it.
// CHECK:      %[[C1:.*]] = "cpu.kernel"(%arg0) <{symbol = "k0_conv", template = "conv_f32"}>
// CHECK:      }) {cpu.offsets = array<i64: 0>, cpu.weights = ["w"]}
// CHECK-NEXT: %[[B1:.*]] = "cpu.kernel"(%[[C1]], %arg0) <{symbol = "k1_conv", template = "conv_f32"}>
// CHECK-NEXT: ^bb0(%[[I:.*]]: tensor<1x16x8x8xf32>, %[[X:.*]]: tensor<1x16x8x8xf32>):
// CHECK:        %[[CV:.*]] = "tpu.Conv"(%[[I]], {{.*}} {cpu.fused = 2 : i64}
// CHECK-NEXT:   %[[A:.*]] = "tpu.Add"(%[[CV]], %[[X]])
// CHECK-NEXT:   %[[R:.*]] = "tpu.Relu"(%[[A]])
// CHECK-NEXT:   "cpu.yield"(%[[R]])
// CHECK:      }) {cpu.offsets = array<i64: 4096>, cpu.weights = ["w"]}
// CHECK-NEXT: %[[C3:.*]] = "cpu.kernel"(%[[B1]]) <{symbol = "k2_conv", template = "conv_f32"}>
// CHECK:      }) {cpu.offsets = array<i64: 0>, cpu.weights = ["w"]}
// CHECK-NEXT: %[[C4:.*]] = "cpu.kernel"(%[[C3]]) <{symbol = "k3_conv", template = "conv_f32"}>
// CHECK:      }) {cpu.offsets = array<i64: 8192>, cpu.weights = ["w"]}
// CHECK-NEXT: %[[D:.*]] = "cpu.kernel"(%[[B1]], %[[C4]]) <{symbol = "k4_conv", template = "conv_f32"}>
// CHECK-NEXT: ^bb0(%[[DI:.*]]: tensor<1x16x8x8xf32>, %[[R4:.*]]: tensor<1x16x8x8xf32>):
// CHECK:        %[[DC:.*]] = "tpu.Conv"(%[[DI]], {{.*}} {cpu.fused = 2 : i64}
// CHECK-NEXT:   %[[A2:.*]] = "tpu.Add"(%[[R4]], %[[DC]])
// CHECK-NEXT:   %[[R2:.*]] = "tpu.Relu"(%[[A2]])
// CHECK-NEXT:   "cpu.yield"(%[[R2]])
// CHECK:      }) {cpu.io = array<i64: 1>, cpu.offsets = array<i64: -1>, cpu.weights = ["w"]}
// CHECK-NEXT: return %[[D]]

// In INT8 mode: the same kernels (int8-conv-channels, int8-conv); the add's requant table is the weight "ra", the ReLU after
// it is a tpu.Lut, also fused (its table "lut"); where the fused add's float fast form runs (the first add), its
// per-channel requant factors are the weight "fm"; the output's dequantizing cast stays apart.
// INT8:      "cpu.kernel"({{.*}}) <{symbol = "k2_conv", template = "int8-conv-channels"}>
// INT8:        "tpu.Conv"({{.*}} {cpu.fused = 2 : i64}
// INT8-NEXT:   "tpu.Add"
// INT8-NEXT:   "tpu.Lut"
// INT8:      }) {cpu.offsets = array<i64: {{[0-9]+}}>, cpu.weights = ["w", "c", "m", "s", "lut", "ra", "fm"]}
// INT8:      "cpu.kernel"({{.*}}) <{symbol = "k5_conv", template = "int8-conv"}>
// INT8:        "tpu.Conv"({{.*}} {cpu.fused = 2 : i64}
// INT8-NEXT:   "tpu.Add"
// INT8-NEXT:   "tpu.Lut"
// INT8:      "cpu.kernel"({{.*}}) <{symbol = "k6_cast", template = "generic.cast"}>
func.func @main(%x: tensor<1x16x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x16x8x8x!quant.calibrated<f32<0.0:6.0>>> {
  %in = "top.Input"(%x) : (tensor<1x16x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x16x8x8x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %none = "top.None"() : () -> none
  %w1 = "top.Weight"() <{value = dense<0.0125> : tensor<16x16x3x3xf32>}> : () -> tensor<16x16x3x3xf32>
  %c1 = "top.Conv"(%in, %w1, %none) <{do_relu = true, pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x16x8x8x!quant.calibrated<f32<-2.0:2.0>>>, tensor<16x16x3x3xf32>, none) -> tensor<1x16x8x8x!quant.calibrated<f32<0.0:4.0>>> loc("c1")
  %w2 = "top.Weight"() <{value = dense<-0.0125> : tensor<16x16x3x3xf32>}> : () -> tensor<16x16x3x3xf32>
  %c2 = "top.Conv"(%c1, %w2, %none) <{pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x16x8x8x!quant.calibrated<f32<0.0:4.0>>>, tensor<16x16x3x3xf32>, none) -> tensor<1x16x8x8x!quant.calibrated<f32<-3.0:3.0>>> loc("c2")
  %a1 = "top.Add"(%c2, %in) : (tensor<1x16x8x8x!quant.calibrated<f32<-3.0:3.0>>>, tensor<1x16x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x16x8x8x!quant.calibrated<f32<-5.0:5.0>>> loc("a1")
  %r1 = "top.Relu"(%a1) : (tensor<1x16x8x8x!quant.calibrated<f32<-5.0:5.0>>>) -> tensor<1x16x8x8x!quant.calibrated<f32<0.0:5.0>>> loc("r1")
  %w3 = "top.Weight"() <{value = dense<0.0125> : tensor<16x16x3x3xf32>}> : () -> tensor<16x16x3x3xf32>
  %c3 = "top.Conv"(%r1, %w3, %none) <{do_relu = true, pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x16x8x8x!quant.calibrated<f32<0.0:5.0>>>, tensor<16x16x3x3xf32>, none) -> tensor<1x16x8x8x!quant.calibrated<f32<0.0:4.0>>> loc("c3")
  %w4 = "top.Weight"() <{value = dense<0.0125> : tensor<16x16x3x3xf32>}> : () -> tensor<16x16x3x3xf32>
  %c4 = "top.Conv"(%c3, %w4, %none) <{pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x16x8x8x!quant.calibrated<f32<0.0:4.0>>>, tensor<16x16x3x3xf32>, none) -> tensor<1x16x8x8x!quant.calibrated<f32<-3.0:3.0>>> loc("c4")
  %wd = "top.Weight"() <{value = dense<0.125> : tensor<16x16x1x1xf32>}> : () -> tensor<16x16x1x1xf32>
  %d = "top.Conv"(%r1, %wd, %none) : (tensor<1x16x8x8x!quant.calibrated<f32<0.0:5.0>>>, tensor<16x16x1x1xf32>, none) -> tensor<1x16x8x8x!quant.calibrated<f32<-3.0:3.0>>> loc("d")
  %a2 = "top.Add"(%c4, %d) : (tensor<1x16x8x8x!quant.calibrated<f32<-3.0:3.0>>>, tensor<1x16x8x8x!quant.calibrated<f32<-3.0:3.0>>>) -> tensor<1x16x8x8x!quant.calibrated<f32<-6.0:6.0>>> loc("a2")
  %r2 = "top.Relu"(%a2) : (tensor<1x16x8x8x!quant.calibrated<f32<-6.0:6.0>>>) -> tensor<1x16x8x8x!quant.calibrated<f32<0.0:6.0>>> loc("r2")
  return %r2 : tensor<1x16x8x8x!quant.calibrated<f32<0.0:6.0>>>
}
