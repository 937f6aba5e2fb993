// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=F16})' --mlir-print-op-generic | FileCheck %s --check-prefix=F16
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=BF16})' --mlir-print-op-generic | FileCheck %s --check-prefix=BF16
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=F32})' --mlir-print-op-generic | FileCheck %s --check-prefix=F32

// In F16 and BF16 modes the input is cast down, weights are converted, every op computes in the mode's type,
// and the output is cast back to f32.
// F16: "tpu.Cast"(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf16>
// F16: "top.Weight"() <{value = dense_resource<{{.*}}> : tensor<4x3xf16>}>
// F16: "tpu.MatMul"({{.*}}) : (tensor<2x4xf16>, tensor<4x3xf16>, none) -> tensor<2x3xf16>
// F16: "tpu.Softmax"({{.*}}) <{axis = 1 : i64}> : (tensor<2x3xf16>) -> tensor<2x3xf16>
// F16: "tpu.Cast"({{.*}}) : (tensor<2x3xf16>) -> tensor<2x3xf32>
// BF16: "tpu.MatMul"({{.*}}) : (tensor<2x4xbf16>, tensor<4x3xbf16>, none) -> tensor<2x3xbf16>
// BF16: "tpu.Softmax"({{.*}}) -> tensor<2x3xbf16>
// F32-NOT: "tpu.Cast"
// F32: "tpu.MatMul"({{.*}}) : (tensor<2x4xf32>, tensor<4x3xf32>, none) -> tensor<2x3xf32>
// F32: "tpu.Softmax"
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %in = "top.Input"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("x")
  %w = "top.Weight"() <{value = dense<0.5> : tensor<4x3xf32>}> : () -> tensor<4x3xf32>
  %n = "top.None"() : () -> none
  %y = "top.MatMul"(%in, %w, %n) : (tensor<2x4xf32>, tensor<4x3xf32>, none) -> tensor<2x3xf32> loc("mm")
  %s = "top.Softmax"(%y) <{axis = 1 : i64}> : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("sm")
  return %s : tensor<2x3xf32>
}
