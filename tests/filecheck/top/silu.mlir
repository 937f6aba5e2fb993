// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-op-generic | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(top-canonicalize))' --mlir-print-op-generic | FileCheck %s

// x * sigmoid(x) (either operand order) is SiLU.
// CHECK-LABEL: sym_name = "silu"
// CHECK: %[[X:.*]] = "top.Input"
// CHECK-NEXT: %[[A:.*]] = "top.SiLU"(%[[X]]) : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[B:.*]] = "top.SiLU"(%[[X]]) : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: "func.return"(%[[A]], %[[B]])
func.func @silu(%a: tensor<1x4x4x4xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) {
  %x = "top.Input"(%a) : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %s = "top.Sigmoid"(%x) : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %y = "top.Mul"(%x, %s) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %s2 = "top.Sigmoid"(%x) : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %z = "top.Mul"(%s2, %x) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %y, %z : tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>
}

// x * sigmoid(1.702 * x) is SiLU with alpha (the sigmoid GELU approximation).
// CHECK-LABEL: sym_name = "silu_alpha"
// CHECK: "top.SiLU"(%{{.*}}) <{alpha = 1.702000e+00 : f64}>
// CHECK-NOT: "top.Sigmoid"
func.func @silu_alpha(%a: tensor<8xf32>) -> tensor<8xf32> {
  %x = "top.Input"(%a) : (tensor<8xf32>) -> tensor<8xf32>
  %c = "top.Weight"() <{value = dense<1.702> : tensor<f32>}> : () -> tensor<f32>
  %t = "top.Mul"(%x, %c) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %s = "top.Sigmoid"(%t) : (tensor<8xf32>) -> tensor<8xf32>
  %y = "top.Mul"(%x, %s) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// Not SiLU: the sigmoid reads another value.
// CHECK-LABEL: sym_name = "not_silu"
// CHECK: "top.Sigmoid"
// CHECK: "top.Mul"
func.func @not_silu(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %x = "top.Input"(%a) : (tensor<8xf32>) -> tensor<8xf32>
  %w = "top.Input"(%b) : (tensor<8xf32>) -> tensor<8xf32>
  %s = "top.Sigmoid"(%w) : (tensor<8xf32>) -> tensor<8xf32>
  %y = "top.Mul"(%x, %s) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
