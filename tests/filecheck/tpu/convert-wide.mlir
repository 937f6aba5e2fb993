// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8})' --mlir-print-op-generic | FileCheck %s --check-prefix=DEFAULT
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8 int-forms=lut,gather,softmax,attention})' --mlir-print-op-generic | FileCheck %s --check-prefix=NARROW

// A residual block: x -> LayerNorm (F32, channel 1 an outlier: per-channel thresholds) -> MatMul
// (K 4) -> Add with the LayerNorm's result -> LayerNorm. By default (wide_input) the MatMul reads
// the first LayerNorm's result on one int16 grid (scale 40/32767: the largest channel's threshold,
// quantized from the float result directly) and its weight is quantized per column as is (column 0:
// 1/127); the Add, read only by the second LayerNorm in F32 (wide_sum), has a per-channel int16
// result (scales th_c/32767). Without the two forms the MatMul folds the per-channel scales into
// its weight rows (column 0: 1 * 0.0157 / 127 ...) and the Add's result is per-channel int8.
// DEFAULT: "tpu.Cast"({{.*}}) : (tensor<2x4xf32>) -> tensor<2x4x!quant.uniform<i8:f32:1, {0.0157{{[0-9]*}},0.3149{{[0-9]*}},{{.*}}}>>
// DEFAULT: "tpu.Cast"({{.*}}) : (tensor<2x4xf32>) -> tensor<2x4x!quant.uniform<i16<-32767:32767>:f32, 0.0012207{{[0-9]*}}>>
// DEFAULT: "tpu.MatMul"({{.*}}) {{.*}} : (tensor<2x4x!quant.uniform<i16<-32767:32767>:f32, 0.0012207{{[0-9]*}}>>, tensor<4x4x!quant.uniform<i8<-127:127>:f32:1, {0.0078740{{[0-9]*}},0.0039370{{[0-9]*}},0.0078740{{[0-9]*}},0.0078740{{[0-9]*}}}>>, none) -> tensor<2x4x!quant.uniform<i8:f32:1, {{.*}}>>
// DEFAULT: "tpu.Add"({{.*}}) -> tensor<2x4x!quant.uniform<i16:f32:1, {3.0518{{[0-9]*}}E-4,9.1555{{[0-9]*}}E-4,3.0518{{[0-9]*}}E-4,3.0518{{[0-9]*}}E-4}>>
// DEFAULT: "tpu.Cast"({{.*}}) : (tensor<2x4x!quant.uniform<i16:f32:1, {{.*}}>>) -> tensor<2x4xf32>
// NARROW: "tpu.MatMul"({{.*}}) {{.*}} : (tensor<2x4x!quant.uniform<i8:f32:1, {{.*}}>>, tensor<4x4x!quant.uniform<i8<-127:127>:f32:1, {2.4800{{[0-9]*}}E-4,{{.*}}}>>, none) -> tensor<2x4x!quant.uniform<i8:f32:1, {{.*}}>>
// NARROW: "tpu.Add"({{.*}}) -> tensor<2x4x!quant.uniform<i8:f32:1, {0.0787{{[0-9]*}},0.2362{{[0-9]*}},{{.*}}}>>
// NARROW-NOT: i16
func.func @main(%x: tensor<2x4x!quant.calibrated<f32<-3.0:3.0>>>) -> tensor<2x4x!quant.calibrated<f32<-4.0:4.0>>> {
  %in = "top.Input"(%x) : (tensor<2x4x!quant.calibrated<f32<-3.0:3.0>>>) -> tensor<2x4x!quant.calibrated<f32<-3.0:3.0>>> loc("x")
  %g = "top.Weight"() <{value = dense<[1.0, 20.0, 1.0, 1.0]> : tensor<4xf32>}> : () -> tensor<4xf32>
  %w = "top.Weight"() <{value = dense<[[1.0, -0.5, 0.25, 0.5], [0.1, 0.2, -0.1, 0.05], [-1.0, 0.5, 1.0, 0.5], [0.5, 0.5, -0.5, 1.0]]> : tensor<4x4xf32>}> : () -> tensor<4x4xf32>
  %n = "top.None"() : () -> none
  %l, %m1, %r1 = "top.LayerNorm"(%in, %g, %n) <{axis = -1 : i64, epsilon = 1.0e-05 : f64}> {lamina.channel_axis = 1 : i64, lamina.channel_th = dense<[2.0, 40.0, 2.0, 2.0]> : tensor<4xf32>} : (tensor<2x4x!quant.calibrated<f32<-3.0:3.0>>>, tensor<4xf32>, none) -> (tensor<2x4x!quant.calibrated<f32<-40.0:40.0>>>, none, none) loc("ln1")
  %f = "top.MatMul"(%l, %w, %n) {lamina.channel_axis = 1 : i64, lamina.channel_th = dense<[4.0, 8.0, 4.0, 4.0]> : tensor<4xf32>} : (tensor<2x4x!quant.calibrated<f32<-40.0:40.0>>>, tensor<4x4xf32>, none) -> tensor<2x4x!quant.calibrated<f32<-8.0:8.0>>> loc("fc")
  %s = "top.Add"(%f, %l) {lamina.channel_axis = 1 : i64, lamina.channel_th = dense<[10.0, 30.0, 10.0, 10.0]> : tensor<4xf32>} : (tensor<2x4x!quant.calibrated<f32<-8.0:8.0>>>, tensor<2x4x!quant.calibrated<f32<-40.0:40.0>>>) -> tensor<2x4x!quant.calibrated<f32<-30.0:30.0>>> loc("res")
  %o, %m2, %r2 = "top.LayerNorm"(%s, %g, %n) <{axis = -1 : i64, epsilon = 1.0e-05 : f64}> : (tensor<2x4x!quant.calibrated<f32<-30.0:30.0>>>, tensor<4xf32>, none) -> (tensor<2x4x!quant.calibrated<f32<-4.0:4.0>>>, none, none) loc("ln2")
  return %o : tensor<2x4x!quant.calibrated<f32<-4.0:4.0>>>
}
