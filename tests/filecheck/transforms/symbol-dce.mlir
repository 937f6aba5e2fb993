// RUN: lamina-opt %s --symbol-dce | FileCheck %s

// Private functions without uses are removed (transitively); public ones stay.
// CHECK-NOT: @dead
// CHECK-NOT: @dead_callee
// CHECK-DAG: func.func @public
// CHECK-DAG: func.func private @used
module {
  func.func private @dead_callee() {
    return
  }
  func.func private @dead() {
    call @dead_callee() : () -> ()
    return
  }
  func.func private @used() {
    return
  }
  func.func @public() {
    call @used() : () -> ()
    return
  }
}
