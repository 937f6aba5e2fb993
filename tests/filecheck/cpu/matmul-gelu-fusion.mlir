// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=F32},convert-tpu-to-cpu{isa=avx2},cpu-arena-alloc)' | FileCheck %s

// An F32 MatMul's following erf GELU (BERT's FFN) moves into the matmul_f32 kernel: one kernel, the
// MatMul marked cpu.fused = 1, its result the GELU's. A tanh GELU is not fused (its tanh is the C
// library's): it stays a generic.float_ew kernel.
// CHECK:      "cpu.kernel"(%arg0) <{symbol = "k0_matmul", template = "matmul_f32"}>
// CHECK:        %[[M:.*]] = "tpu.MatMul"({{.*}}) {{.*}}{cpu.fused = 1 : i64}
// CHECK-NEXT:   %[[G:.*]] = "tpu.GELU"(%[[M]])
// CHECK-NEXT:   "cpu.yield"(%[[G]])
// CHECK:      "cpu.kernel"({{.*}}) <{symbol = "k1_matmul", template = "matmul_f32"}>
// CHECK-NOT:    cpu.fused
// CHECK:      "cpu.kernel"({{.*}}) <{symbol = "k2_gelu", template = "generic.float_ew"}>
// CHECK:        "tpu.GELU"({{.*}}) <{approximate = "tanh"}>
// CHECK:      return
func.func @main(%x: tensor<1x8x16xf32>) -> tensor<1x8x16xf32> {
  %w1 = "top.Weight"() <{value = dense<0.125> : tensor<16x32xf32>}> : () -> tensor<16x32xf32>
  %b1 = "top.Weight"() <{value = dense<0.5> : tensor<32xf32>}> : () -> tensor<32xf32>
  %m = "top.MatMul"(%x, %w1, %b1) : (tensor<1x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<1x8x32xf32> loc("m")
  %h = "top.GELU"(%m) : (tensor<1x8x32xf32>) -> tensor<1x8x32xf32> loc("h")
  %w2 = "top.Weight"() <{value = dense<0.25> : tensor<32x16xf32>}> : () -> tensor<32x16xf32>
  %none = "top.None"() : () -> none
  %o = "top.MatMul"(%h, %w2, %none) : (tensor<1x8x32xf32>, tensor<32x16xf32>, none) -> tensor<1x8x16xf32> loc("o")
  %t = "top.GELU"(%o) <{approximate = "tanh"}> : (tensor<1x8x16xf32>) -> tensor<1x8x16xf32> loc("t")
  return %t : tensor<1x8x16xf32>
}
