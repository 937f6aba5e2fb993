// RUN: lamina-opt %s --inline | FileCheck %s

// CHECK-LABEL: func.func @caller
// CHECK-NOT: call @callee
// CHECK: arith.addi %arg0, %arg0 : i32
// CHECK: return
// The callee is private and dead after inlining: removed.
// CHECK-NOT: func.func private @callee
module {
  func.func private @callee(%x: i32) -> i32 {
    %0 = "arith.addi"(%x, %x) : (i32, i32) -> i32
    return %0 : i32
  }
  func.func @caller(%a: i32) -> i32 {
    %r = call @callee(%a) : (i32) -> i32
    return %r : i32
  }
}
