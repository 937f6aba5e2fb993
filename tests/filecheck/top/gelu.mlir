// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-op-generic | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(top-canonicalize))' --mlir-print-op-generic | FileCheck %s

// PyTorch's erf export: (x * (1 + erf(x / sqrt 2))) * 0.5.
// CHECK-LABEL: sym_name = "gelu_erf"
// CHECK: %[[X:.*]] = "top.Input"
// CHECK-NEXT: %[[G:.*]] = "top.GELU"(%[[X]]) : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: "func.return"(%[[G]])
func.func @gelu_erf(%a: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %x = "top.Input"(%a) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %s2 = "top.Weight"() <{value = dense<1.41421354> : tensor<f32>}> : () -> tensor<f32>
  %one = "top.Weight"() <{value = dense<1.0> : tensor<f32>}> : () -> tensor<f32>
  %half = "top.Weight"() <{value = dense<0.5> : tensor<f32>}> : () -> tensor<f32>
  %0 = "top.Div"(%x, %s2) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %1 = "top.Erf"(%0) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %2 = "top.Add"(%1, %one) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %3 = "top.Mul"(%x, %2) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %4 = "top.Mul"(%3, %half) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %4 : tensor<2x8xf32>
}

// Other association and x * 0.7071 for the division: (0.5 * x) * (1 + erf(0.7071 * x)).
// CHECK-LABEL: sym_name = "gelu_erf_mul"
// CHECK: "top.GELU"
// CHECK-NOT: "top.Erf"
func.func @gelu_erf_mul(%a: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %x = "top.Input"(%a) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %r2 = "top.Weight"() <{value = dense<0.707106769> : tensor<1xf32>}> : () -> tensor<1xf32>
  %one = "top.Weight"() <{value = dense<1.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %half = "top.Weight"() <{value = dense<0.5> : tensor<1xf32>}> : () -> tensor<1xf32>
  %h = "top.Mul"(%half, %x) : (tensor<1xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %0 = "top.Mul"(%r2, %x) : (tensor<1xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %1 = "top.Erf"(%0) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %2 = "top.Add"(%one, %1) : (tensor<1xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %3 = "top.Mul"(%h, %2) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %3 : tensor<2x8xf32>
}

// The tanh form: 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))).
// CHECK-LABEL: sym_name = "gelu_tanh"
// CHECK: %[[X:.*]] = "top.Input"
// CHECK-NEXT: %[[G:.*]] = "top.GELU"(%[[X]]) <{approximate = "tanh"}>
// CHECK-NEXT: "func.return"(%[[G]])
func.func @gelu_tanh(%a: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %x = "top.Input"(%a) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %three = "top.Weight"() <{value = dense<3.0> : tensor<f32>}> : () -> tensor<f32>
  %c = "top.Weight"() <{value = dense<0.044715> : tensor<f32>}> : () -> tensor<f32>
  %k = "top.Weight"() <{value = dense<0.797884583> : tensor<f32>}> : () -> tensor<f32>
  %one = "top.Weight"() <{value = dense<1.0> : tensor<f32>}> : () -> tensor<f32>
  %half = "top.Weight"() <{value = dense<0.5> : tensor<f32>}> : () -> tensor<f32>
  %0 = "top.Pow"(%x, %three) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %1 = "top.Mul"(%0, %c) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %2 = "top.Add"(%x, %1) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %3 = "top.Mul"(%2, %k) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %4 = "top.Tanh"(%3) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %5 = "top.Add"(%4, %one) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %6 = "top.Mul"(%x, %5) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %7 = "top.Mul"(%6, %half) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %7 : tensor<2x8xf32>
}

// Not GELU: the constant is 0.6, not 1 / sqrt 2.
// CHECK-LABEL: sym_name = "not_gelu"
// CHECK-NOT: "top.GELU"
// CHECK: "top.Erf"
func.func @not_gelu(%a: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %x = "top.Input"(%a) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %r2 = "top.Weight"() <{value = dense<0.6> : tensor<f32>}> : () -> tensor<f32>
  %one = "top.Weight"() <{value = dense<1.0> : tensor<f32>}> : () -> tensor<f32>
  %half = "top.Weight"() <{value = dense<0.5> : tensor<f32>}> : () -> tensor<f32>
  %0 = "top.Mul"(%x, %r2) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %1 = "top.Erf"(%0) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %2 = "top.Add"(%1, %one) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %3 = "top.Mul"(%x, %2) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %4 = "top.Mul"(%3, %half) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %4 : tensor<2x8xf32>
}
