// RUN: lamina-opt %s --split-input-file --verify-diagnostics

// Convolution and pooling windows must fit the input's spatial dims.

func.func @conv_kernel_rank(%x: tensor<1x3x8x8xf32>, %w: tensor<2x3x3x3xf32>) -> tensor<*xf32> {
  %n = "top.None"() : () -> none
  // expected-error @+1 {{'top.Conv' op 'kernel_shape' has 1 values [3] but the input has 2 spatial dims (expected 2)}}
  %0 = "top.Conv"(%x, %w, %n) <{kernel_shape = array<i64: 3>}> : (tensor<1x3x8x8xf32>, tensor<2x3x3x3xf32>, none) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @conv_strides(%x: tensor<1x3x8x8xf32>, %w: tensor<2x3x3x3xf32>) -> tensor<*xf32> {
  %n = "top.None"() : () -> none
  // expected-error @+1 {{'top.Conv' op 'strides' [0, 0] must all be >= 1}}
  %0 = "top.Conv"(%x, %w, %n) <{strides = array<i64: 0, 0>}> : (tensor<1x3x8x8xf32>, tensor<2x3x3x3xf32>, none) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// Region ops: one bool condition, a consistent Scan.

func.func @if_cond(%x: tensor<4xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{'top.If' op condition must be a bool tensor, got 'tensor<4xf32>'}}
  %0 = "top.If"(%x) ({
    "top.Yield"(%x) : (tensor<4xf32>) -> ()
  }, {
    "top.Yield"(%x) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @scan_inputs(%s: tensor<2xf32>, %xs: tensor<3x2xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{'top.Scan' op num_scan_inputs 5 must be between 1 and the 2 inputs}}
  %0, %1 = "top.Scan"(%s, %xs) <{num_scan_inputs = 5 : i64}> ({
  ^bb0(%a: tensor<2xf32>, %b: tensor<2xf32>):
    "top.Yield"(%a, %b) : (tensor<2xf32>, tensor<2xf32>) -> ()
  }) : (tensor<2xf32>, tensor<3x2xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %0 : tensor<*xf32>
}
