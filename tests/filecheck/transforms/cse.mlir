// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(cse))' --mlir-print-op-generic | FileCheck %s

// CHECK-LABEL: sym_name = "simple"
func.func @simple(%x: f32) -> (f32, f32) {
  // CHECK: %[[M:.*]] = "arith.mulf"(%[[X:arg[0-9]+]], %[[X]])
  // CHECK-NOT: "arith.mulf"
  // CHECK: "func.return"(%[[M]], %[[M]])
  %0 = "arith.mulf"(%x, %x) : (f32, f32) -> f32
  %1 = "arith.mulf"(%x, %x) : (f32, f32) -> f32
  "func.return"(%0, %1) : (f32, f32) -> ()
}

// Different attributes or operand order are different expressions.
// CHECK-LABEL: sym_name = "distinct"
func.func @distinct(%x: i32, %y: i32) -> (i32, i32, i32, i32) {
  // CHECK-COUNT-2: "arith.subi"
  // CHECK-COUNT-2: "arith.constant"
  %0 = "arith.subi"(%x, %y) : (i32, i32) -> i32
  %1 = "arith.subi"(%y, %x) : (i32, i32) -> i32
  %2 = "arith.constant"() <{value = 1 : i32}> : () -> i32
  %3 = "arith.constant"() <{value = 2 : i32}> : () -> i32
  "func.return"(%0, %1, %2, %3) : (i32, i32, i32, i32) -> ()
}

// An expression in a dominating block is reused in a dominated one.
// CHECK-LABEL: sym_name = "dominance"
func.func @dominance(%c: i1, %x: i32) -> i32 {
  // CHECK: %[[A:.*]] = "arith.addi"(%[[X:arg[0-9]+]], %[[X]])
  // CHECK: ^bb1(%[[Y:.*]]: i32):
  // CHECK-NEXT: %[[S:.*]] = "arith.addi"(%[[A]], %[[Y]])
  // CHECK-NEXT: "func.return"(%[[S]])
  %0 = "arith.addi"(%x, %x) : (i32, i32) -> i32
  "cf.br"(%0)[^bb1] : (i32) -> ()
^bb1(%y: i32):
  %1 = "arith.addi"(%x, %x) : (i32, i32) -> i32
  %2 = "arith.addi"(%1, %y) : (i32, i32) -> i32
  "func.return"(%2) : (i32) -> ()
}

// Sibling blocks do not dominate each other: both adds stay.
// CHECK-LABEL: sym_name = "siblings"
func.func @siblings(%c: i1, %x: i32) -> i32 {
  // CHECK-COUNT-2: "arith.addi"
  "cf.cond_br"(%c)[^bb1, ^bb2] <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (i1) -> ()
^bb1:
  %0 = "arith.addi"(%x, %x) : (i32, i32) -> i32
  "func.return"(%0) : (i32) -> ()
^bb2:
  %1 = "arith.addi"(%x, %x) : (i32, i32) -> i32
  "func.return"(%1) : (i32) -> ()
}
