// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-op-generic | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(top-canonicalize))' --mlir-print-op-generic | FileCheck %s

// Reshape(Unsqueeze(Reshape(x))) is one Reshape to the final static shape.
// CHECK-LABEL: sym_name = "reshapes"
// CHECK: %[[X:.*]] = "top.Input"
// CHECK-NOT: "top.Unsqueeze"
// CHECK: %[[R:.*]] = "top.Reshape"(%[[X]], %{{.*}}) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<4x6xf32>
// CHECK-NOT: "top.Reshape"
// CHECK: "func.return"(%[[R]])
func.func @reshapes(%a: tensor<2x3x4xf32>) -> tensor<4x6xf32> {
  %x = "top.Input"(%a) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %s1 = "top.Weight"() <{value = dense<[6, 4]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %0 = "top.Reshape"(%x, %s1) : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<6x4xf32>
  %ax = "top.Weight"() <{value = dense<[0]> : tensor<1xi64>}> : () -> tensor<1xi64>
  %1 = "top.Unsqueeze"(%0, %ax) : (tensor<6x4xf32>, tensor<1xi64>) -> tensor<1x6x4xf32>
  %s2 = "top.Weight"() <{value = dense<[4, 6]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %2 = "top.Reshape"(%1, %s2) : (tensor<1x6x4xf32>, tensor<2xi64>) -> tensor<4x6xf32>
  return %2 : tensor<4x6xf32>
}

// Reshape back to the input shape disappears.
// CHECK-LABEL: sym_name = "reshape_round_trip"
// CHECK-NOT: "top.Reshape"
// CHECK: "func.return"
func.func @reshape_round_trip(%a: tensor<2x6xf32>) -> tensor<2x6xf32> {
  %x = "top.Input"(%a) : (tensor<2x6xf32>) -> tensor<2x6xf32>
  %s1 = "top.Weight"() <{value = dense<[3, 4]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %0 = "top.Reshape"(%x, %s1) : (tensor<2x6xf32>, tensor<2xi64>) -> tensor<3x4xf32>
  %s2 = "top.Weight"() <{value = dense<[2, 6]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %1 = "top.Reshape"(%0, %s2) : (tensor<3x4xf32>, tensor<2xi64>) -> tensor<2x6xf32>
  return %1 : tensor<2x6xf32>
}

// Permute(Permute(x, [0, 2, 3, 1]), [0, 2, 1, 3]) = Permute(x, [0, 2, 3, 1][[0, 2, 1, 3]]) = Permute(x, [0, 3, 2, 1]).
// CHECK-LABEL: sym_name = "permutes"
// CHECK: %[[P:.*]] = "top.Permute"(%{{.*}}) <{order = array<i64: 0, 3, 2, 1>}> : (tensor<1x2x3x4xf32>) -> tensor<1x4x3x2xf32>
// CHECK-NOT: "top.Permute"
// CHECK: "func.return"(%[[P]])
func.func @permutes(%a: tensor<1x2x3x4xf32>) -> tensor<1x4x3x2xf32> {
  %x = "top.Input"(%a) : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  %0 = "top.Permute"(%x) <{order = array<i64: 0, 2, 3, 1>}> : (tensor<1x2x3x4xf32>) -> tensor<1x3x4x2xf32>
  %1 = "top.Permute"(%0) <{order = array<i64: 0, 2, 1, 3>}> : (tensor<1x3x4x2xf32>) -> tensor<1x4x3x2xf32>
  return %1 : tensor<1x4x3x2xf32>
}

// Inverse permutations cancel.
// CHECK-LABEL: sym_name = "permutes_cancel"
// CHECK-NOT: "top.Permute"
// CHECK: "func.return"
func.func @permutes_cancel(%a: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %x = "top.Input"(%a) : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  %0 = "top.Permute"(%x) <{order = array<i64: 0, 2, 3, 1>}> : (tensor<1x2x3x4xf32>) -> tensor<1x3x4x2xf32>
  %1 = "top.Permute"(%0) <{order = array<i64: 0, 3, 1, 2>}> : (tensor<1x3x4x2xf32>) -> tensor<1x2x3x4xf32>
  return %1 : tensor<1x2x3x4xf32>
}

// A Reshape whose shape is computed (the static last dim sliced out of the shape of a
// dynamic-batch tensor) and whose result is static takes a constant shape; the chain dies.
// CHECK-LABEL: sym_name = "computed_shape"
// CHECK-NOT: "top.Shape"
// CHECK-NOT: "top.Slice"
// CHECK: "top.Reshape"(%{{.*}}, %{{.*}}) : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<8xf32>
func.func @computed_shape(%a: tensor<2x4xf32>, %b: tensor<?x8xf32>) -> tensor<8xf32> {
  %x = "top.Input"(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = "top.Input"(%b) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %s = "top.Shape"(%y) : (tensor<?x8xf32>) -> tensor<2xi64>
  %st = "top.Weight"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %en = "top.Weight"() <{value = dense<2> : tensor<1xi64>}> : () -> tensor<1xi64>
  %n = "top.None"() : () -> none
  %d = "top.Slice"(%s, %st, %en, %n, %n) : (tensor<2xi64>, tensor<1xi64>, tensor<1xi64>, none, none) -> tensor<1xi64>
  %r = "top.Reshape"(%x, %d) : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}
