// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8})' --mlir-print-op-generic | FileCheck %s --check-prefix=DEFAULT
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8 int-forms=lut,gather,softmax,attention})' --mlir-print-op-generic | FileCheck %s --check-prefix=NARROW

// A transformer FFN: MatMul (K 4) -> GELU -> MatMul (K 6). By default (lut16) the first MatMul's
// result is int16 (scale 8/32767), the GELU a 65536-entry tpu.Lut16 whose int16 result (L =
// min(32767, (2^31 - 1) // (127 * 6)) = 32767, scale 4/32767) the second MatMul reads; without
// lut16 both are int8 and the GELU is the 256-entry tpu.Lut.
// DEFAULT: "tpu.MatMul"({{.*}}) -> tensor<2x6x!quant.uniform<i16:f32, 2.4414{{[0-9]*}}E-4>>
// DEFAULT: "tpu.Lut16"({{.*}}) <{fn = "GELU", table = dense<{{.*}}> : tensor<65536xi16>}> : (tensor<2x6x!quant.uniform<i16:f32, 2.4414{{[0-9]*}}E-4>>) -> tensor<2x6x!quant.uniform<i16<-32767:32767>:f32, 1.2207{{[0-9]*}}E-4>>
// DEFAULT: "tpu.MatMul"({{.*}}) <{{.*}}> : (tensor<2x6x!quant.uniform<i16<-32767:32767>:f32, 1.2207{{[0-9]*}}E-4>>, {{.*}}) -> tensor<2x3x!quant.uniform<i8:f32, {{.*}}>>
// DEFAULT-NOT: "tpu.Lut"(
// NARROW: "tpu.MatMul"({{.*}}) -> tensor<2x6x!quant.uniform<i8:f32, 0.0629{{[0-9]*}}>>
// NARROW: "tpu.Lut"({{.*}}) <{fn = "GELU", table = dense<{{.*}}> : tensor<256xi8>}>
// NARROW-NOT: i16
func.func @main(%x: tensor<2x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<2x3x!quant.calibrated<f32<-5.0:5.0>>> {
  %in = "top.Input"(%x) : (tensor<2x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<2x4x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %w = "top.Weight"() <{value = dense<[[1.0, -2.0, 0.5, 3.0, -1.5, 0.25], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [-0.1, -0.2, -0.3, -0.4, -0.5, -0.6], [1.0, 1.0, 1.0, -1.0, -1.0, -1.0]]> : tensor<4x6xf32>}> : () -> tensor<4x6xf32>
  %w2 = "top.Weight"() <{value = dense<[[1.0, -1.0, 0.5], [0.2, 0.3, 0.4], [-0.5, 0.5, 1.0], [0.1, -0.1, 0.2], [0.7, 0.0, -0.7], [1.0, 1.0, 1.0]]> : tensor<6x3xf32>}> : () -> tensor<6x3xf32>
  %n = "top.None"() : () -> none
  %m = "top.MatMul"(%in, %w, %n) : (tensor<2x4x!quant.calibrated<f32<-2.0:2.0>>>, tensor<4x6xf32>, none) -> tensor<2x6x!quant.calibrated<f32<-8.0:8.0>>> loc("fc1")
  %g = "top.GELU"(%m) : (tensor<2x6x!quant.calibrated<f32<-8.0:8.0>>>) -> tensor<2x6x!quant.calibrated<f32<-0.17:4.0>>> loc("gelu")
  %z = "top.MatMul"(%g, %w2, %n) : (tensor<2x6x!quant.calibrated<f32<-0.17:4.0>>>, tensor<6x3xf32>, none) -> tensor<2x3x!quant.calibrated<f32<-5.0:5.0>>> loc("fc2")
  return %z : tensor<2x3x!quant.calibrated<f32<-5.0:5.0>>>
}
