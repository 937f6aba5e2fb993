// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-cpu,cpu-arena-alloc)' | FileCheck %s

// Fusion: the INT8 Add's template (generic.int_ew) takes the following activation (a tpu.Lut, the
// INT8 form of the Sigmoid) into its epilogue: one kernel whose region holds both ops (the Add
// marked cpu.fused = 1), its result the Lut's; the table becomes one of its packed weights. The
// dequantizing cast of the model's output stays a kernel of its own (generic.cast fuses nothing).
// CHECK:      "cpu.kernel"(%{{.*}}, %{{.*}}) <{symbol = "k2_add", template = "generic.int_ew"}>
// CHECK:        %[[A:.*]] = "tpu.Add"({{.*}}) {{.*}}{cpu.fused = 1 : i64}
// CHECK-NEXT:   %[[L:.*]] = "tpu.Lut"(%[[A]]) <{fn = "Sigmoid"
// CHECK-NEXT:   "cpu.yield"(%[[L]])
// CHECK:      }) {cpu.offsets = array<i64: 512>, cpu.weights = ["lut"]}
// CHECK-NEXT: "cpu.kernel"{{.*}}<{symbol = "k3_cast", template = "generic.cast"}>
// CHECK:      }) {cpu.io = array<i64: 2>, cpu.offsets = array<i64: -1>}
// CHECK-NEXT: return
func.func @main(%x: tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>, %y: tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:1.0>>> {
  %a = "top.Add"(%x, %y) : (tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>, tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4x8x8x!quant.calibrated<f32<-4.0:4.0>>> loc("a")
  %s = "top.Sigmoid"(%a) : (tensor<1x4x8x8x!quant.calibrated<f32<-4.0:4.0>>>) -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:1.0>>> loc("s")
  return %s : tensor<1x4x8x8x!quant.calibrated<f32<0.0:1.0>>>
}
