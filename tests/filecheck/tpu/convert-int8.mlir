// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8})' --mlir-print-op-generic | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8 asymmetric=true})' --mlir-print-op-generic | FileCheck %s --check-prefix=ASYM

// The input is quantized (int8: its range is signed), the conv gets per-channel int8 weights, an
// int32 bias and multiplier/rshift arrays, its relu output is uint8, Sigmoid becomes a LUT and the
// result is dequantized at the return.
// CHECK: "tpu.Cast"(%{{.*}}) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4x!quant.uniform<i8:f32, 0.0157{{[0-9]*}}>>
// CHECK-DAG: "tpu.Weight"() <{value = dense_resource<{{.*}}> : tensor<2x2x1x1xi8>}> : () -> tensor<2x2x1x1x!quant.uniform<i8<-127:127>:f32:0, {0.0039{{[0-9]*}},0.0078{{[0-9]*}}}>>
// CHECK-DAG: "top.Weight"() <{value = dense_resource<{{.*}}> : tensor<2xi32>}>
// CHECK: "tpu.Conv"({{.*}}) <{do_relu = true, multiplier = array<i64: {{.*}}>, rshift = array<i64: {{.*}}>}> : {{.*}} -> tensor<1x2x4x4x!quant.uniform<u8:f32, 0.0117{{[0-9]*}}>>
// CHECK: "tpu.Lut"({{.*}}) <{fn = "Sigmoid", table = dense<{{.*}}> : tensor<256xui8>}> : {{.*}} -> tensor<1x2x4x4x!quant.uniform<u8:f32, 0.0039{{[0-9]*}}>>
// CHECK: "tpu.Cast"({{.*}}) : (tensor<1x2x4x4x!quant.uniform<u8:f32, 0.0039{{[0-9]*}}>>) -> tensor<1x2x4x4xf32>
// CHECK-NOT: "top.Conv"
// ASYM: "tpu.Cast"(%{{.*}}) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4x!quant.uniform<i8:f32, 0.0156{{[0-9]*}}:-1>>
func.func @main(%x: tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x2x4x4x!quant.calibrated<f32<0.0:1.0>>> {
  %in = "top.Input"(%x) : (tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %w = "top.Weight"() <{value = dense<[[[[0.5]], [[-0.25]]], [[[1.0]], [[0.5]]]]> : tensor<2x2x1x1xf32>}> : () -> tensor<2x2x1x1xf32>
  %b = "top.Weight"() <{value = dense<[0.1, -0.2]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %c = "top.Conv"(%in, %w, %b) <{do_relu = 1 : i64}> : (tensor<1x2x4x4x!quant.calibrated<f32<-2.0:2.0>>>, tensor<2x2x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4x!quant.calibrated<f32<0.0:3.0>>> loc("conv")
  %s = "top.Sigmoid"(%c) : (tensor<1x2x4x4x!quant.calibrated<f32<0.0:3.0>>>) -> tensor<1x2x4x4x!quant.calibrated<f32<0.0:1.0>>> loc("sig")
  return %s : tensor<1x2x4x4x!quant.calibrated<f32<0.0:1.0>>>
}
