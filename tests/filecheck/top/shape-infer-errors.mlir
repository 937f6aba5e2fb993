// RUN: not lamina-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(top-shape-infer))' 2>&1 | FileCheck %s

// Shapes that do not fit an op are shape-inference errors naming the tensor (not verifier errors:
// inside an If branch that is not taken they are allowed, see shape-infer-regions.mlir).

// CHECK: error: 'top.MaxPool' op shape inference failed for tensor 'p': kernel size 20 (kernel 20, dilation 1) exceeds the padded input size 8 of spatial dim 0
func.func @pool_too_big(%x: tensor<1x3x8x8xf32>) -> tensor<*xf32> {
  %0, %1 = "top.MaxPool"(%x) <{kernel_shape = array<i64: 20, 20>}> : (tensor<1x3x8x8xf32>) -> (tensor<*xf32>, none) loc("p")
  return %0 : tensor<*xf32>
}

// -----

// CHECK: error: 'top.MaxPool' op shape inference failed for tensor 'p2': 'kernel_shape' [2] has 1 values but the input of rank 4 has 2 spatial dims
func.func @pool_rank(%x: tensor<1x3x8x8xf32>) -> tensor<*xf32> {
  %0, %1 = "top.MaxPool"(%x) <{kernel_shape = array<i64: 2>}> : (tensor<1x3x8x8xf32>) -> (tensor<*xf32>, none) loc("p2")
  return %0 : tensor<*xf32>
}

// -----

// CHECK: error: 'top.Concat' op shape inference failed for tensor 'c': input shapes [[4, 2], [3, 3]] differ outside the concatenation axis 0
func.func @concat_shapes(%x: tensor<4x2xf32>, %y: tensor<3x3xf32>) -> tensor<*xf32> {
  %0 = "top.Concat"(%x, %y) <{axis = 0 : i64}> : (tensor<4x2xf32>, tensor<3x3xf32>) -> tensor<*xf32> loc("c")
  return %0 : tensor<*xf32>
}

// -----

// CHECK: error: 'top.Split' op shape inference failed for tensor 's': split sizes [1, 5] must be 2 non-negative sizes adding up to the split dim 4
func.func @split_sizes(%x: tensor<4xf32>) -> tensor<*xf32> {
  %s = "top.Weight"() <{value = dense<[1, 5]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %0, %1 = "top.Split"(%x, %s) : (tensor<4xf32>, tensor<2xi64>) -> (tensor<*xf32>, tensor<*xf32>) loc("s")
  return %0 : tensor<*xf32>
}

// -----

// CHECK: error: 'top.Softmax' op shape inference failed for tensor 'sm': axis 5 is out of range for an input of rank 2 (expected -2 to 1)
func.func @softmax_axis(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = "top.Softmax"(%x) <{axis = 5 : i64}> : (tensor<4x3xf32>) -> tensor<4x3xf32> loc("sm")
  return %0 : tensor<4x3xf32>
}
