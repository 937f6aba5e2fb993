// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-op-generic | FileCheck %s

// Constant folding materializes one constant; x + 0 folds to x.
// CHECK-LABEL: sym_name = "fold_add"
func.func @fold_add(%n: i32) -> (i32, i32) {
  // CHECK-DAG: %[[C3:.*]] = "arith.constant"() <{value = 3 : i32}> : () -> i32
  // CHECK-NOT: "arith.addi"
  // CHECK: "func.return"(%[[C3]], %arg{{[0-9]+}})
  %c1 = "arith.constant"() <{value = 1 : i32}> : () -> i32
  %c2 = "arith.constant"() <{value = 2 : i32}> : () -> i32
  %s = "arith.addi"(%c1, %c2) : (i32, i32) -> i32
  %z = "arith.constant"() <{value = 0 : i32}> : () -> i32
  %t = "arith.addi"(%n, %z) : (i32, i32) -> i32
  "func.return"(%s, %t) : (i32, i32) -> ()
}

// Integer arithmetic wraps at the type's width.
// CHECK-LABEL: sym_name = "fold_wrap"
func.func @fold_wrap() -> i8 {
  // CHECK: "arith.constant"() <{value = -128 : i8}>
  %a = "arith.constant"() <{value = 127 : i8}> : () -> i8
  %b = "arith.constant"() <{value = 1 : i8}> : () -> i8
  %s = "arith.addi"(%a, %b) : (i8, i8) -> i8
  "func.return"(%s) : (i8) -> ()
}

// Dead pure ops are erased.
// CHECK-LABEL: sym_name = "dead"
func.func @dead(%x: f32) -> f32 {
  // CHECK-NOT: "arith.mulf"
  // CHECK: "func.return"(%arg{{[0-9]+}})
  %0 = "arith.mulf"(%x, %x) : (f32, f32) -> f32
  "func.return"(%x) : (f32) -> ()
}

// Float folding on splat tensors.
// CHECK-LABEL: sym_name = "fold_splat"
func.func @fold_splat() -> tensor<4xf32> {
  // CHECK: "arith.constant"() <{value = dense<5.000000e+00> : tensor<4xf32>}>
  // CHECK-NOT: "arith.addf"
  %a = "arith.constant"() <{value = dense<2.0> : tensor<4xf32>}> : () -> tensor<4xf32>
  %b = "arith.constant"() <{value = dense<3.0> : tensor<4xf32>}> : () -> tensor<4xf32>
  %s = "arith.addf"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%s) : (tensor<4xf32>) -> ()
}

// select with a constant condition picks a side.
// CHECK-LABEL: sym_name = "fold_select"
func.func @fold_select(%a: i32, %b: i32) -> i32 {
  // CHECK: ^bb0(%{{.*}}: i32, %[[B:.*]]: i32):
  // CHECK-NOT: "arith.select"
  // CHECK: "func.return"(%[[B]])
  %f = "arith.constant"() <{value = false}> : () -> i1
  %r = "arith.select"(%f, %a, %b) : (i1, i32, i32) -> i32
  "func.return"(%r) : (i32) -> ()
}
