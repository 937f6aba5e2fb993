// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-op-generic | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(top-canonicalize))' --mlir-print-op-generic | FileCheck %s

// x * Clip(x + 3, 0, 6) / 6 (paddle2onnx's hard-swish) and x * Clip(3 + x, 0, 6) * (1/6) are HardSwish.
// CHECK-LABEL: sym_name = "hardswish"
// CHECK: %[[X:.*]] = "top.Input"
// CHECK-NEXT: %[[A:.*]] = "top.HardSwish"(%[[X]]) : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[B:.*]] = "top.HardSwish"(%[[X]]) : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: "func.return"(%[[A]], %[[B]])
func.func @hardswish(%a: tensor<1x4x4x4xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) {
  %x = "top.Input"(%a) : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %three = "top.Weight"() <{value = dense<3.0> : tensor<f32>}> : () -> tensor<f32>
  %zero = "top.Weight"() <{value = dense<0.0> : tensor<f32>}> : () -> tensor<f32>
  %six = "top.Weight"() <{value = dense<6.0> : tensor<f32>}> : () -> tensor<f32>
  %sixth = "top.Weight"() <{value = dense<0.16666667> : tensor<f32>}> : () -> tensor<f32>
  %t = "top.Add"(%x, %three) : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %c = "top.Clip"(%t, %zero, %six) : (tensor<1x4x4x4xf32>, tensor<f32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %m = "top.Mul"(%x, %c) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %y = "top.Div"(%m, %six) : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %t2 = "top.Add"(%three, %x) : (tensor<f32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %c2 = "top.Clip"(%t2, %zero, %six) : (tensor<1x4x4x4xf32>, tensor<f32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %m2 = "top.Mul"(%c2, %x) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %z = "top.Mul"(%m2, %sixth) : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  return %y, %z : tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>
}

// Not HardSwish: Clip(x + 3, 0, 5); the product's factor reads another value.
// CHECK-LABEL: sym_name = "not_hardswish"
// CHECK-NOT: "top.HardSwish"
// CHECK: "func.return"
func.func @not_hardswish(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %x = "top.Input"(%a) : (tensor<8xf32>) -> tensor<8xf32>
  %w = "top.Input"(%b) : (tensor<8xf32>) -> tensor<8xf32>
  %three = "top.Weight"() <{value = dense<3.0> : tensor<f32>}> : () -> tensor<f32>
  %zero = "top.Weight"() <{value = dense<0.0> : tensor<f32>}> : () -> tensor<f32>
  %five = "top.Weight"() <{value = dense<5.0> : tensor<f32>}> : () -> tensor<f32>
  %six = "top.Weight"() <{value = dense<6.0> : tensor<f32>}> : () -> tensor<f32>
  %t = "top.Add"(%x, %three) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %c = "top.Clip"(%t, %zero, %five) : (tensor<8xf32>, tensor<f32>, tensor<f32>) -> tensor<8xf32>
  %m = "top.Mul"(%x, %c) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %y = "top.Div"(%m, %six) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %t2 = "top.Add"(%x, %three) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %c2 = "top.Clip"(%t2, %zero, %six) : (tensor<8xf32>, tensor<f32>, tensor<f32>) -> tensor<8xf32>
  %m2 = "top.Mul"(%w, %c2) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %z = "top.Div"(%m2, %six) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %y, %z : tensor<8xf32>, tensor<8xf32>
}
