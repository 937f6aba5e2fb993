// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8})' --mlir-print-op-generic | FileCheck %s --check-prefix=DEFAULT
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8 int-forms=all})' --mlir-print-op-generic | FileCheck %s --check-prefix=ALL
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8 int-forms=none})' --mlir-print-op-generic | FileCheck %s --check-prefix=NONE
// RUN: not lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8 int-forms=lut,gelu})' 2>&1 | FileCheck %s --check-prefix=BAD

// An embedding Gather, a LayerNorm, a GELU and a Softmax. By default (lut,gather,softmax) the table
// is quantized to the Gather result's type and gathered as integers, the GELU is a LUT, the Softmax
// is integer and LayerNorm runs in f32 between casts; int-forms=all makes it an integer op too;
// int-forms=none leaves every one of them in f32.
// DEFAULT: "tpu.Weight"() <{value = dense_resource<{{.*}}> : tensor<10x8xi8>}> : () -> tensor<10x8x!quant.uniform<i8:f32, 0.0236{{[0-9]*}}>>
// DEFAULT: "tpu.Gather"({{.*}}) <{axis = 0 : i64}> : (tensor<10x8x!quant.uniform<i8:f32, {{.*}}>>, tensor<2x4xi64>) -> tensor<2x4x8x!quant.uniform<i8:f32, 0.0236{{[0-9]*}}>>
// DEFAULT: "tpu.LayerNorm"({{.*}}) <{axis = -1 : i64, epsilon = {{.*}}}> : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, none, none)
// DEFAULT: "tpu.Lut"({{.*}}) <{fn = "GELU"
// DEFAULT: "tpu.Softmax"({{.*}}) <{axis = -1 : i64, exp_table = array<i64: 32768, {{.*}}>, out_factor = array<i64: 16711680>}>
// ALL: "tpu.Gather"
// ALL: "tpu.LayerNorm"({{.*}}) <{axis = -1 : i64, bias_q = array<i64: {{.*}}>, eps_q = array<i64: {{[0-9]+}}>, epsilon = {{.*}}, in_weight = array<i64: 16777216, 16777216, 16777216, 16777216, 16777216, 16777216, 16777216, 16777216>, multiplier = array<i64: {{.*}}>, shift = array<i64: {{.*}}>}> : (tensor<2x4x8x!quant.uniform<i8:f32, {{.*}}>>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8x!quant.uniform<i8:f32, 0.0314{{[0-9]*}}>>, none, none)
// ALL: "tpu.Lut"({{.*}}) <{fn = "GELU"
// ALL: "tpu.Softmax"({{.*}}) <{axis = -1 : i64, exp_table = array<i64: 32768, {{.*}}>, out_factor = array<i64: 16711680>}> : (tensor<2x4x8x!quant.uniform<{{.*}}>>) -> tensor<2x4x8x!quant.uniform<u8:f32, 0.0039{{[0-9]*}}>>
// ALL-NOT: "tpu.Cast"({{.*}}) : (tensor<2x4x8x!quant.uniform<i8:f32, 0.0314{{[0-9]*}}>>) -> tensor<2x4x8xf32>
// NONE: "tpu.Gather"({{.*}}) <{axis = 0 : i64}> : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
// NONE: "tpu.GELU"({{.*}}) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// NONE: "tpu.Softmax"({{.*}}) <{axis = -1 : i64}> : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// NONE-NOT: "tpu.Lut"
// BAD: unknown integer form 'gelu'
func.func @main(%i: tensor<2x4xi64>) -> tensor<2x4x8x!quant.calibrated<f32<0.0:1.0>>> {
  %ids = "top.Input"(%i) : (tensor<2x4xi64>) -> tensor<2x4xi64> loc("ids")
  %w = "top.Weight"() <{value = dense<[[1.0, -2.0, 0.5, 3.0, -1.5, 0.25, 2.5, -3.0], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [-0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7, -0.8], [1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0, -1.0], [2.0, 0.0, -2.0, 0.0, 2.0, 0.0, -2.0, 0.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [1.5, -0.5, 1.5, -0.5, 1.5, -0.5, 1.5, -0.5], [0.0, 1.0, 2.0, 3.0, 2.0, 1.0, 0.0, -1.0], [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 2.0], [0.9, -0.9, 0.8, -0.8, 0.7, -0.7, 0.6, -0.6]]> : tensor<10x8xf32>}> : () -> tensor<10x8xf32>
  %e = "top.Gather"(%w, %ids) <{axis = 0 : i64}> : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8x!quant.calibrated<f32<-3.0:3.0>>> loc("emb")
  %g = "top.Weight"() <{value = dense<[1.0, 0.9, 1.1, 1.0, 0.8, 1.2, 1.0, 1.0]> : tensor<8xf32>}> : () -> tensor<8xf32>
  %b = "top.Weight"() <{value = dense<[0.0, 0.1, -0.1, 0.0, 0.2, -0.2, 0.0, 0.05]> : tensor<8xf32>}> : () -> tensor<8xf32>
  %n, %mean, %rstd = "top.LayerNorm"(%e, %g, %b) <{axis = -1 : i64, epsilon = 1.0e-05 : f64}> : (tensor<2x4x8x!quant.calibrated<f32<-3.0:3.0>>>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8x!quant.calibrated<f32<-4.0:4.0>>>, none, none) loc("ln")
  %a = "top.GELU"(%n) : (tensor<2x4x8x!quant.calibrated<f32<-4.0:4.0>>>) -> tensor<2x4x8x!quant.calibrated<f32<-0.2:4.0>>> loc("gelu")
  %s = "top.Softmax"(%a) <{axis = -1 : i64}> : (tensor<2x4x8x!quant.calibrated<f32<-0.2:4.0>>>) -> tensor<2x4x8x!quant.calibrated<f32<0.0:1.0>>> loc("sm")
  return %s : tensor<2x4x8x!quant.calibrated<f32<0.0:1.0>>>
}
