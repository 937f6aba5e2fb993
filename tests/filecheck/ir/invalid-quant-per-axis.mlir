// RUN: lamina-opt %s --split-input-file --verify-diagnostics
// A per-axis quantized element type must fit the tensor around it (MLIR's verifyPerAxisQuantization,
// which MLIR runs in its quant ops; Lamina's verifier checks every operand and result type, before
// the op's own checks that index scales by channel).

func.func @axis(%x: tensor<2x3x!quant.uniform<i8:f32:5, {0.1,0.2,0.3}>>) -> tensor<2x3x!quant.uniform<i8:f32, 0.5>> {
  // expected-error @+1 {{'tpu.Requant' op operand #0 type 'tensor<2x3x!quant.uniform<i8:f32:5, {1.000000e-01,2.000000e-01,3.000000e-01}>>': quantized dimension must be less than tensor rank}}
  %0 = "tpu.Requant"(%x) <{multiplier = array<i64: 1073741824, 1073741824, 1073741824>, rshift = array<i64: 1, 1, 1>}> : (tensor<2x3x!quant.uniform<i8:f32:5, {0.1,0.2,0.3}>>) -> tensor<2x3x!quant.uniform<i8:f32, 0.5>>
  return %0 : tensor<2x3x!quant.uniform<i8:f32, 0.5>>
}

// -----

func.func @scales(%x: tensor<2x3x!quant.uniform<i8:f32:1, {0.1,0.2}>>) -> tensor<2x3x!quant.uniform<i8:f32, 0.5>> {
  // expected-error @+1 {{'tpu.Requant' op operand #0 type 'tensor<2x3x!quant.uniform<i8:f32:1, {1.000000e-01,2.000000e-01}>>': quantized dimension size does not match number of scales}}
  %0 = "tpu.Requant"(%x) <{multiplier = array<i64: 1073741824, 1073741824>, rshift = array<i64: 1, 1>}> : (tensor<2x3x!quant.uniform<i8:f32:1, {0.1,0.2}>>) -> tensor<2x3x!quant.uniform<i8:f32, 0.5>>
  return %0 : tensor<2x3x!quant.uniform<i8:f32, 0.5>>
}

// -----

func.func @result(%x: tensor<2x3x!quant.uniform<i8:f32, 0.5>>) -> tensor<2x3x!quant.uniform<i8:f32:0, {0.1,0.2,0.3}>> {
  // expected-error @+1 {{'tpu.Requant' op result #0 type 'tensor<2x3x!quant.uniform<i8:f32:0, {1.000000e-01,2.000000e-01,3.000000e-01}>>': quantized dimension size does not match number of scales}}
  %0 = "tpu.Requant"(%x) <{multiplier = array<i64: 1073741824>, rshift = array<i64: 1>}> : (tensor<2x3x!quant.uniform<i8:f32, 0.5>>) -> tensor<2x3x!quant.uniform<i8:f32:0, {0.1,0.2,0.3}>>
  return %0 : tensor<2x3x!quant.uniform<i8:f32:0, {0.1,0.2,0.3}>>
}

// -----

// a dynamic quantized dimension is fine
func.func @dynamic(%x: tensor<2x?x!quant.uniform<i8:f32:1, {0.1,0.2}>>) -> tensor<2x?x!quant.uniform<i8:f32:1, {0.1,0.2}>> {
  return %x : tensor<2x?x!quant.uniform<i8:f32:1, {0.1,0.2}>>
}
