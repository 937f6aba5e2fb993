// RUN: lamina-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(top-shape-infer))' --mlir-print-op-generic | FileCheck %s
// RUN: lamina-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(top-shape-infer{input-shapes=4x3x16x16}))' --mlir-print-op-generic | FileCheck %s --check-prefix=NEW
// RUN: not lamina-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(top-shape-infer{input-shapes=4x3,7}))' 2>&1 | FileCheck %s --check-prefix=BAD

// Unranked and dynamic results are refined from the operands; the signature follows.
// CHECK: function_type = (tensor<1x3x8x8xf32>) -> tensor<1x4x4x4xf32>, sym_name = "refine"
// CHECK: "top.Conv"{{.*}} -> tensor<1x4x8x8xf32>
// CHECK: "top.Relu"{{.*}} -> tensor<1x4x8x8xf32>
// CHECK: "top.MaxPool"{{.*}} -> (tensor<1x4x4x4xf32>, none)
// CHECK: "func.return"(%{{.*}}) : (tensor<1x4x4x4xf32>) -> ()

// After changing the input shape, every type is re-inferred.
// NEW: function_type = (tensor<4x3x16x16xf32>) -> tensor<4x4x8x8xf32>, sym_name = "refine"
// NEW: ^bb0(%{{.*}}: tensor<4x3x16x16xf32>):
// NEW: "top.Input"{{.*}} -> tensor<4x3x16x16xf32>
// NEW: "top.Conv"{{.*}} -> tensor<4x4x16x16xf32>
// NEW: "top.MaxPool"{{.*}} -> (tensor<4x4x8x8xf32>, none)

// BAD: error: 'func.func' op input-shapes gives 2 shapes but the function has 1 inputs
func.func @refine(%x: tensor<1x3x8x8xf32>) -> tensor<*xf32> {
  %in = "top.Input"(%x) : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %w = "top.Weight"() <{value = dense<0.5> : tensor<4x3x3x3xf32>}> : () -> tensor<4x3x3x3xf32>
  %n = "top.None"() : () -> none
  %c = "top.Conv"(%in, %w, %n) <{pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<*xf32>
  %r = "top.Relu"(%c) : (tensor<*xf32>) -> tensor<?x4x?x?xf32>
  %p, %i = "top.MaxPool"(%r) <{kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>}> : (tensor<?x4x?x?xf32>) -> (tensor<*xf32>, none)
  return %p : tensor<*xf32>
}

// -----

// A Reshape by a constant shape gets its static result type.
// CHECK: function_type = (tensor<2x3x4xf32>) -> tensor<6x4xf32>, sym_name = "reshape_const"
// CHECK: "top.Reshape"{{.*}} -> tensor<6x4xf32>
func.func @reshape_const(%x: tensor<2x3x4xf32>) -> tensor<?x?xf32> {
  %in = "top.Input"(%x) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %s = "top.Weight"() <{value = dense<[-1, 4]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %r = "top.Reshape"(%in, %s) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
