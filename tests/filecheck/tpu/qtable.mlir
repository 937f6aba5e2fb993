// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8 qtable=%S/Inputs/qtable.txt},tpu-canonicalize)' --mlir-print-op-generic | FileCheck %s

// The qtable floats 'sig' to F16: the int8 MatMul output is dequantized straight to f16 for it,
// the rest stays INT8.
// CHECK: "tpu.MatMul"{{.*}} -> tensor<2x3x!quant.uniform<u8:f32, 0.0078{{[0-9]*}}>>
// CHECK: "tpu.Cast"({{.*}}) : (tensor<2x3x!quant.uniform<u8:f32, 0.0078{{[0-9]*}}>>) -> tensor<2x3xf16>
// CHECK: "tpu.Sigmoid"({{.*}}) : (tensor<2x3xf16>) -> tensor<2x3xf16>
// CHECK-NOT: "tpu.Lut"
func.func @main(%x: tensor<2x4x!quant.calibrated<f32<-1.0:1.0>>>) -> tensor<2x3x!quant.calibrated<f32<0.0:1.0>>> {
  %in = "top.Input"(%x) : (tensor<2x4x!quant.calibrated<f32<-1.0:1.0>>>) -> tensor<2x4x!quant.calibrated<f32<-1.0:1.0>>> loc("x")
  %w = "top.Weight"() <{value = dense<0.5> : tensor<4x3xf32>}> : () -> tensor<4x3xf32>
  %n = "top.None"() : () -> none
  %y = "top.MatMul"(%in, %w, %n) <{do_relu = 1 : i64}> : (tensor<2x4x!quant.calibrated<f32<-1.0:1.0>>>, tensor<4x3xf32>, none) -> tensor<2x3x!quant.calibrated<f32<0.0:2.0>>> loc("mm")
  %s = "top.Sigmoid"(%y) : (tensor<2x3x!quant.calibrated<f32<0.0:2.0>>>) -> tensor<2x3x!quant.calibrated<f32<0.0:1.0>>> loc("sig")
  return %s : tensor<2x3x!quant.calibrated<f32<0.0:1.0>>>
}
