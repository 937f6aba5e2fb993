// RUN: lamina-opt %s --split-input-file --verify-diagnostics
// The same file passes `mlir-opt-22 --verify-diagnostics` (tests/filecheck/interop/invalid-quant.mlir):
// every quant type rejected here is rejected by MLIR, in the same words.

// expected-error @+1 {{scale 0.000000e+00 out of expressed type range [1.401298e-45, 3.402823e+38]}}
func.func private @zero_scale(!quant.uniform<i8:f32, 0.0:1>)

// -----

// expected-error @+1 {{scale -1.000000e+00 out of expressed type range [1.401298e-45, 3.402823e+38]}}
func.func private @negative_scale(!quant.uniform<i8:f32, -1.0>)

// -----

// expected-error @+1 {{scale INF out of expressed type range [1.401298e-45, 3.402823e+38]}}
func.func private @infinite_scale(!quant.uniform<i8:f32, 0x7FF0000000000000:1>)

// -----

// expected-error @+1 {{scale 1.000000e+10 out of expressed type range [5.960464e-08, 6.550400e+04]}}
func.func private @f16_overflow(!quant.uniform<i8:f16, 1.0e10>)

// -----

// expected-error @+1 {{scale 0.000000e+00 out of expressed type range [1.401298e-45, 3.402823e+38]}}
func.func private @per_axis_zero(!quant.uniform<i8:f32:0, {1.0, 0.0}>)

// -----

// expected-error @+1 {{scale INF out of expressed type range [1.401298e-45, 3.402823e+38]}}
func.func private @per_axis_inf(!quant.uniform<i8:f32:0, {1.0,0x7FF0000000000000}>)

// -----

// expected-error @+1 {{illegal quantized dimension: -1}}
func.func private @axis(!quant.uniform<i8:f32:-1, {1.0}>)

// -----

// expected-error @+1 {{illegal storage min and storage max: (10:-10)}}
func.func private @min_above_max(!quant.uniform<i8<10:-10>:f32, 1.0>)

// -----

// expected-error @+1 {{illegal storage type minimum: -1}}
func.func private @min_below_type(!quant.uniform<u8<-1:10>:f32, 1.0>)

// -----

// expected-error @+1 {{illegal storage type maximum: 200}}
func.func private @max_above_type(!quant.uniform<i8<-10:200>:f32, 1.0>)

// -----

// expected-error @+1 {{illegal storage type size: 64}}
func.func private @wide(!quant.uniform<i64:f32, 1.0>)

// -----

// expected-error @+1 {{illegal min and max: (5.000000e+00:1.000000e+00)}}
func.func private @calibrated(!quant.calibrated<f32<5.0:1.0>>)
