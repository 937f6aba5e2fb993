// RUN: lamina-opt %s --split-input-file --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-npu)' | FileCheck %s
// RUN: lamina-opt %s --split-input-file --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-npu{chip=lnpu-edge})' | FileCheck %s --check-prefix=EDGE

// The lut16 form on the chip: the int16 pre-GELU MatMul result, a Lut16 command whose table is the
// 65536 int16 entries (1, 1, 1, 65536) and the second MatMul reading its int16 result; lnpu-edge
// computes no int16, so those ops stay on the host (a model lowered for it never has them).
// CHECK-LABEL: func.func @main
// CHECK: "npu.MatMul"({{.*}}) -> tensor<1x2x1x6x!quant.uniform<i16:f32, 2.4414{{[0-9]*}}E-4>>
// CHECK: %[[T:.*]] = "npu.Weight"() <{value = dense_resource<gelu_table> : tensor<1x1x1x65536xi16>}>
// CHECK: "npu.Lut16"(%{{.*}}, %[[T]]) : (tensor<1x2x1x6x!quant.uniform<i16:f32, 2.4414{{[0-9]*}}E-4>>, tensor<1x1x1x65536xi16>) -> tensor<1x2x1x6x!quant.uniform<i16<-32767:32767>:f32, 1.2207{{[0-9]*}}E-4>>
// CHECK: "npu.MatMul"(%{{.*}}) {{.*}}: (tensor<1x2x1x6x!quant.uniform<i16<-32767:32767>:f32, {{.*}}>>, {{.*}} -> tensor<1x2x1x3x!quant.uniform<i8:f32, {{.*}}>>
// CHECK-NOT: tpu.
// EDGE: "tpu.MatMul"
// EDGE: "tpu.Lut16"
// EDGE: "tpu.MatMul"
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

// -----

// A per-channel (axis 1) 4-d product: one multiplier and shift per channel in the Eltwise's quant
// tensor (1, C, 1, 3) = [multiplier, 0, rshift], quant_axis 1 (the view's c), on every chip.
// CHECK-LABEL: func.func @main
// CHECK: %[[Q:.*]] = "npu.Weight"() <{value = dense_resource<m_quant> : tensor<1x3x1x3xi32>}>
// CHECK: "npu.Eltwise"(%{{.*}}, %{{.*}}, %[[Q]]) <{{{.*}}op = "MUL"{{.*}}quant_axis = 1 : i64{{.*}}}> : (tensor<1x3x2x2x!quant.uniform<i8:f32:1, {{.*}}>>, tensor<1x3x2x2x!quant.uniform<i8:f32:1, {{.*}}>>, tensor<1x3x1x3xi32>) -> tensor<1x3x2x2x!quant.uniform<i8:f32:1, {{.*}}>>
// EDGE: "npu.Eltwise"({{.*}}op = "MUL"{{.*}}quant_axis = 1 : i64
func.func @main(%x: tensor<1x3x2x2x!quant.calibrated<f32<-4.0:4.0>>>) -> tensor<1x3x2x2x!quant.calibrated<f32<-16.0:16.0>>> {
  %in = "top.Input"(%x) : (tensor<1x3x2x2x!quant.calibrated<f32<-4.0:4.0>>>) -> tensor<1x3x2x2x!quant.calibrated<f32<-4.0:4.0>>> loc("x")
  %a = "top.Add"(%in, %in) {lamina.channel_axis = 1 : i64, lamina.channel_th = dense<[8.0, 1.0, 2.0]> : tensor<3xf32>} : (tensor<1x3x2x2x!quant.calibrated<f32<-4.0:4.0>>>, tensor<1x3x2x2x!quant.calibrated<f32<-4.0:4.0>>>) -> tensor<1x3x2x2x!quant.calibrated<f32<-8.0:8.0>>> loc("a")
  %m = "top.Mul"(%a, %a) {lamina.channel_axis = 1 : i64, lamina.channel_th = dense<[16.0, 1.0, 4.0]> : tensor<3xf32>} : (tensor<1x3x2x2x!quant.calibrated<f32<-8.0:8.0>>>, tensor<1x3x2x2x!quant.calibrated<f32<-8.0:8.0>>>) -> tensor<1x3x2x2x!quant.calibrated<f32<-16.0:16.0>>> loc("m")
  return %m : tensor<1x3x2x2x!quant.calibrated<f32<-16.0:16.0>>>
}
