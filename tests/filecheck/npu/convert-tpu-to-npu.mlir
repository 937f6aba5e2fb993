// RUN: lamina-opt %s --split-input-file --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-npu)' | FileCheck %s
// RUN: lamina-opt %s --split-input-file --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-npu{chip=lnpu-edge})' | FileCheck %s --check-prefix=EDGE

// Each tpu op becomes one TIU command on 4-d views; its constants become npu.Weight ops in the
// hardware layout the command reads: the 2x2x2x2 filter as (1, Cout, Cin/g, kh*kw), the bias and the
// per-channel (multiplier, rshift) pairs as (1, C, 1, k) tensors, the sigmoid's LUT as 256 entries;
// the ReLU folds into the saturation bounds (out_min = the zero point). Concat is a GDMA copy.
// CHECK-LABEL: func.func @main
// CHECK: %[[X:.*]] = "npu.Cast"(%arg0) <{{{.*}}scale = 0.0157{{[0-9]*}} : f64{{.*}}}> : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4x!quant.uniform<i8:f32, 0.0157{{[0-9]*}}>>
// CHECK-DAG: %[[W:.*]] = "npu.Weight"() <{value = dense_resource<conv_weight> : tensor<1x2x2x4xi8>}>
// CHECK-DAG: %[[B:.*]] = "npu.Weight"() <{value = dense_resource<conv_bias> : tensor<1x2x1x1xi32>}>
// CHECK-DAG: %[[Q:.*]] = "npu.Weight"() <{value = dense_resource<conv_quant> : tensor<1x2x1x2xi32>}>
// CHECK: %[[C:.*]] = "npu.Conv"(%[[X]], %[[W]], %[[B]], %[[Q]]) <{{{.*}}kh = 2 : i64, kw = 2 : i64{{.*}}out_max = 255 : i64, out_min = 0 : i64{{.*}}pad_bottom = 1 : i64{{.*}}pad_right = 1 : i64{{.*}}}> {{.*}} -> tensor<1x2x4x4x!quant.uniform<u8:f32, 0.0117{{[0-9]*}}>>
// CHECK: %[[T:.*]] = "npu.Weight"() <{value = dense_resource<sig_table> : tensor<1x1x1x256xui8>}>
// CHECK: %[[S:.*]] = "npu.Lut"(%[[C]], %[[T]])
// CHECK: %[[K:.*]] = "npu.Copy"(%[[S]], %[[S]]) <{moves = array<i64: 0, 0, 1, 1, 1, 32, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 1, 1, 1, 32, 0, 0, 0, 1, 32, 0, 0, 0, 1>}>
// CHECK: %[[O:.*]] = "npu.Cast"(%[[K]]) {{.*}} -> tensor<1x4x4x4xf32>
// CHECK: return %[[O]]
// CHECK-NOT: tpu.
// The edge chip computes in int8 too: the same commands.
// EDGE: "npu.Conv"
func.func @main(%x: tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4x4x4x!quant.calibrated<f32<0.0:1.0>>> {
  %in = "top.Input"(%x) : (tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %w = "top.Weight"() <{value = dense<[[[[0.5, 0.25], [0.0, 1.0]], [[-0.25, 0.5], [1.0, 0.0]]], [[[1.0, 0.0], [0.5, 0.5]], [[0.5, -1.0], [0.25, 0.25]]]]> : tensor<2x2x2x2xf32>}> : () -> tensor<2x2x2x2xf32>
  %b = "top.Weight"() <{value = dense<[0.1, -0.2]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %c = "top.Conv"(%in, %w, %b) <{do_relu = true, pads = array<i64: 0, 0, 1, 1>}> : (tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>>, tensor<2x2x2x2xf32>, tensor<2xf32>) -> tensor<1x2x4x4x!quant.calibrated<f32<0.0:3.0>>> loc("conv")
  %s = "top.Sigmoid"(%c) : (tensor<1x2x4x4x!quant.calibrated<f32<0.0:3.0>>>) -> tensor<1x2x4x4x!quant.calibrated<f32<0.0:1.0>>> loc("sig")
  %k = "top.Concat"(%s, %s) <{axis = 1 : i64}> : (tensor<1x2x4x4x!quant.calibrated<f32<0.0:1.0>>>, tensor<1x2x4x4x!quant.calibrated<f32<0.0:1.0>>>) -> tensor<1x4x4x4x!quant.calibrated<f32<0.0:1.0>>> loc("cat")
  return %k : tensor<1x4x4x4x!quant.calibrated<f32<0.0:1.0>>>
}

// -----

// A Gather has no TIU form: it stays a tpu op, to run on the host; the float Add beside it becomes
// an Eltwise on the (B, M, 1, K) view of its 2-d operands, with reshapes between the shapes.
// CHECK-LABEL: func.func @main
// CHECK: %[[G:.*]] = "tpu.Gather"
// CHECK: %[[V:.*]] = "npu.Reshape"(%[[G]]) : (tensor<3x8xf32>) -> tensor<1x3x1x8xf32>
// CHECK: %[[A:.*]] = "npu.Eltwise"(%[[V]], %[[V]]) <{{{.*}}op = "ADD"{{.*}}}> : (tensor<1x3x1x8xf32>, tensor<1x3x1x8xf32>) -> tensor<1x3x1x8xf32>
// CHECK: %[[R:.*]] = "npu.Reshape"(%[[A]]) : (tensor<1x3x1x8xf32>) -> tensor<3x8xf32>
// CHECK: return %[[R]]
// EDGE: "tpu.Gather"
// EDGE-NOT: npu.Eltwise
func.func @main(%t: tensor<10x8xf32>, %i: tensor<3xi64>) -> tensor<3x8xf32> {
  %g = "top.Gather"(%t, %i) <{axis = 0 : i64}> : (tensor<10x8xf32>, tensor<3xi64>) -> tensor<3x8xf32> loc("g")
  %a = "top.Add"(%g, %g) : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32> loc("a")
  return %a : tensor<3x8xf32>
}
