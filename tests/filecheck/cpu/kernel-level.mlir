// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-cpu{isa=avx2},cpu-arena-alloc)' | FileCheck %s

// The kernel level: every tpu op a cpu.kernel holding it (and the constants it reads), its template
// and symbol as properties, its packed weights' keys (cpu.weights) and its result's arena offset
// (cpu.offsets). The input's quantizing cast goes to cast-quantize-f32 (f32 lanes, no division),
// the convs to the fast INT8 template (it has an AVX2 path without VNNI): its
// packed weights, the folded per-channel constant and the requant factors. The residual Add of
// both convs' results fuses into the second conv's kernel (its other operand, the first conv's
// result, is computed before it: the kernel reads it, here as the conv's own input too; the add's
// multipliers and shift are the table "ra"). The input cast's bytes (offset 0) are dead once the
// first conv has read them: the fused kernel's result reuses them; it cannot take the first conv's
// (still read by the fused kernel). The Flatten is a view (cpu.alias, its operand's offset); the
// output cast writes the caller's buffer (cpu.io slot 1: after the one input).
// CHECK:      func.func @main(%arg0: tensor<1x4x8x8xf32>) -> tensor<1x256xf32> attributes {cpu.arena_bytes = 512 : i64}
// CHECK:      %[[Q:.*]] = "cpu.kernel"(%arg0) <{symbol = "k0_cast", template = "cast-quantize-f32"}>
// CHECK:        "tpu.Cast"
// CHECK:      }) {cpu.offsets = array<i64: 0>}
// CHECK-NEXT: %[[C1:.*]] = "cpu.kernel"(%[[Q]]) <{symbol = "k1_conv", template = "int8-conv"}>
// CHECK:        "tpu.Weight"
// CHECK:        "tpu.Conv"
// CHECK:      }) {cpu.offsets = array<i64: 256>, cpu.weights = ["w", "c", "m", "s"]}
// CHECK-NEXT: %[[C2:.*]] = "cpu.kernel"(%[[C1]]) <{symbol = "k2_conv", template = "int8-conv"}>
// CHECK-NEXT: ^bb0(%[[ARG:.*]]: tensor
// CHECK:        %[[CV:.*]] = "tpu.Conv"(%[[ARG]], {{.*}} {cpu.fused = 1 : i64}
// CHECK-NEXT:   %[[ADD:.*]] = "tpu.Add"(%[[ARG]], %[[CV]])
// CHECK-NEXT:   "cpu.yield"(%[[ADD]])
// CHECK:      }) {cpu.offsets = array<i64: 0>, cpu.weights = ["w", "c", "m", "s", "ra"]}
// CHECK-NEXT: %[[F:.*]] = "cpu.kernel"(%[[C2]]) <{symbol = "k3_flatten", template = "generic.alias"}>
// CHECK:      }) {cpu.alias = true, cpu.offsets = array<i64: 0>}
// CHECK-NEXT: %[[O:.*]] = "cpu.kernel"(%[[F]]) <{symbol = "k4_cast", template = "generic.cast"}>
// CHECK:      }) {cpu.io = array<i64: 1>, cpu.offsets = array<i64: -1>}
// CHECK-NEXT: return %[[O]]
func.func @main(%x: tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x256x!quant.calibrated<f32<0.0:4.0>>> {
  %in = "top.Input"(%x) : (tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %none = "top.None"() : () -> none
  %w1 = "top.Weight"() <{value = dense<0.125> : tensor<4x4x3x3xf32>}> : () -> tensor<4x4x3x3xf32>
  %c1 = "top.Conv"(%in, %w1, %none) <{do_relu = true, pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>, tensor<4x4x3x3xf32>, none) -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>> loc("c1")
  %w2 = "top.Weight"() <{value = dense<0.0625> : tensor<4x4x3x3xf32>}> : () -> tensor<4x4x3x3xf32>
  %c2 = "top.Conv"(%c1, %w2, %none) <{do_relu = true, pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>>, tensor<4x4x3x3xf32>, none) -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>> loc("c2")
  %a = "top.Add"(%c1, %c2) : (tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>>, tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>>) -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>> loc("a")
  %f = "top.Flatten"(%a) <{axis = 1 : i64}> : (tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>>) -> tensor<1x256x!quant.calibrated<f32<0.0:4.0>>> loc("f")
  return %f : tensor<1x256x!quant.calibrated<f32<0.0:4.0>>>
}
