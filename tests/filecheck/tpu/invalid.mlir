// RUN: lamina-opt %s --split-input-file --verify-diagnostics

// Per-channel requantization parameters must match the channel count of the per-axis type.

func.func @requant_count(%x: tensor<2x3x!quant.uniform<i8:f32:1, {0.1,0.2,0.3}>>) -> tensor<2x3x!quant.uniform<i8:f32, 0.5>> {
  // expected-error @+1 {{'tpu.Requant' op expected 3 multipliers and rshifts (one per channel), got 2 and 3}}
  %0 = "tpu.Requant"(%x) <{multiplier = array<i64: 1073741824, 1073741824>, rshift = array<i64: 1, 1, 1>}> : (tensor<2x3x!quant.uniform<i8:f32:1, {0.1,0.2,0.3}>>) -> tensor<2x3x!quant.uniform<i8:f32, 0.5>>
  return %0 : tensor<2x3x!quant.uniform<i8:f32, 0.5>>
}

// -----

func.func @requant_per_tensor(%x: tensor<2x3x!quant.uniform<i8:f32, 0.1>>) -> tensor<2x3x!quant.uniform<i8:f32, 0.5>> {
  // expected-error @+1 {{'tpu.Requant' op a per-tensor requant has one multiplier and one rshift}}
  %0 = "tpu.Requant"(%x) <{multiplier = array<i64: 1073741824, 1073741824>, rshift = array<i64: 1, 1>}> : (tensor<2x3x!quant.uniform<i8:f32, 0.1>>) -> tensor<2x3x!quant.uniform<i8:f32, 0.5>>
  return %0 : tensor<2x3x!quant.uniform<i8:f32, 0.5>>
}

// -----

// A requant rescales values; it never changes the shape (a Concat's inputs keep theirs).

func.func @requant_shape(%x: tensor<2x3x!quant.uniform<i8:f32, 0.1>>) -> tensor<2x6x!quant.uniform<i8:f32, 0.5>> {
  // expected-error @+1 {{'tpu.Requant' op input shape [2, 3] and result shape [2, 6] differ}}
  %0 = "tpu.Requant"(%x) <{multiplier = 1073741824 : i64, rshift = 1 : i64}> : (tensor<2x3x!quant.uniform<i8:f32, 0.1>>) -> tensor<2x6x!quant.uniform<i8:f32, 0.5>>
  return %0 : tensor<2x6x!quant.uniform<i8:f32, 0.5>>
}

// -----

func.func @add_count(%a: tensor<2x3x!quant.uniform<i8:f32, 0.1>>, %b: tensor<2x3x!quant.uniform<i8:f32, 0.1>>) -> tensor<2x3x!quant.uniform<i8:f32:1, {0.1,0.2,0.3}>> {
  // expected-error @+1 {{'tpu.Add' op expected 2 multipliers and 1 rshift, or 2 x C multipliers and C rshifts (per channel), got 5 and 3}}
  %0 = "tpu.Add"(%a, %b) <{multiplier = array<i64: 1, 2, 3, 4, 5>, rshift = array<i64: 0, 0, 0>}> : (tensor<2x3x!quant.uniform<i8:f32, 0.1>>, tensor<2x3x!quant.uniform<i8:f32, 0.1>>) -> tensor<2x3x!quant.uniform<i8:f32:1, {0.1,0.2,0.3}>>
  return %0 : tensor<2x3x!quant.uniform<i8:f32:1, {0.1,0.2,0.3}>>
}

// -----

// A per-channel Mul has one multiplier and rshift per channel of its per-axis result.
func.func @mul_channels(%a: tensor<1x3x2x2x!quant.uniform<i8:f32:1, {0.1,0.2,0.3}>>, %b: tensor<1x!quant.uniform<i8:f32, 0.5>>) -> tensor<1x3x2x2x!quant.uniform<i8:f32:1, {0.1,0.2,0.3}>> {
  // expected-error @+1 {{'tpu.Mul' op expected 1 multiplier, or one per channel of a per-axis result, got 2 for 3 channels}}
  %0 = "tpu.Mul"(%a, %b) <{multiplier = array<i64: 1073741824, 1073741824>, rshift = array<i64: 0, 0>}> : (tensor<1x3x2x2x!quant.uniform<i8:f32:1, {0.1,0.2,0.3}>>, tensor<1x!quant.uniform<i8:f32, 0.5>>) -> tensor<1x3x2x2x!quant.uniform<i8:f32:1, {0.1,0.2,0.3}>>
  return %0 : tensor<1x3x2x2x!quant.uniform<i8:f32:1, {0.1,0.2,0.3}>>
}
