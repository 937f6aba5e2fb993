// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-cpu,cpu-arena-alloc)' | FileCheck %s

// An INT8 stem: the input's quantizing cast (cast-quantize-f32), then a 7x7/2 conv over 3 channels
// with its ReLU, which goes to int8-conv-im2col (K = 3*7*7 packed densely) and takes the following
// 3x3/2 max pool into its kernel (the conv marked cpu.fused = 1; the kernel's result the pool's:
// the conv's own result is never stored in the arena).
// CHECK:      "cpu.kernel"(%arg0) <{symbol = "k0_cast", template = "cast-quantize-f32"}>
// CHECK:      "cpu.kernel"(%{{.*}}) <{symbol = "k1_conv", template = "int8-conv-im2col"}>
// CHECK:        %[[C:.*]] = "tpu.Conv"({{.*}}{cpu.fused = 1 : i64
// CHECK-NEXT:   %[[P:.*]]:2 = "tpu.MaxPool"(%[[C]])
// CHECK-NEXT:   "cpu.yield"(%[[P]]#0, %[[P]]#1)
// CHECK:      }) {cpu.offsets = array<i64: {{[0-9]+}}, -1>, cpu.weights = ["w", "c", "m", "s"]}
// CHECK-NOT:  template = "pool"
// CHECK:      return
func.func @main(%x: tensor<1x3x64x64x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x16x16x16x!quant.calibrated<f32<0.0:4.0>>> {
  %in = "top.Input"(%x) : (tensor<1x3x64x64x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x3x64x64x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %none = "top.None"() : () -> none
  %w = "top.Weight"() <{value = dense<0.03125> : tensor<16x3x7x7xf32>}> : () -> tensor<16x3x7x7xf32>
  %c = "top.Conv"(%in, %w, %none) <{do_relu = true, strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>}> : (tensor<1x3x64x64x!quant.calibrated<f32<-2.0:2.0>>>, tensor<16x3x7x7xf32>, none) -> tensor<1x16x32x32x!quant.calibrated<f32<0.0:4.0>>> loc("c")
  %p, %i = "top.MaxPool"(%c) <{kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x16x32x32x!quant.calibrated<f32<0.0:4.0>>>) -> (tensor<1x16x16x16x!quant.calibrated<f32<0.0:4.0>>>, none) loc("p")
  return %p : tensor<1x16x16x16x!quant.calibrated<f32<0.0:4.0>>>
}
