// Custom forms of builtin.module and func.* print as mlir-opt prints them.
// RUN: lamina-opt %s | FileCheck %s
// RUN: lamina-opt %s | lamina-opt | FileCheck %s

// CHECK: module @m attributes {lamina.note = "x"} {
// CHECK-NEXT:   func.func private @decl(i32) -> f32
// CHECK-NEXT:   func.func @f(%arg0: i32 {lamina.arg = 1 : i64}, %arg1: f32) -> (i32, f32) {
// CHECK-NEXT:     %0:2 = call @g(%arg0, %arg1) : (i32, f32) -> (i32, f32)
// CHECK-NEXT:     return %0#0, %0#1 : i32, f32
// CHECK-NEXT:   }
// CHECK-NEXT:   func.func @g(%arg0: i32, %arg1: f32) -> (i32, f32) attributes {lamina.kind = "leaf"} {
// CHECK-NEXT:     return %arg0, %arg1 : i32, f32
// CHECK-NEXT:   }
// CHECK-NEXT: }
module @m attributes {lamina.note = "x"} {
  func.func private @decl(i32) -> f32
  func.func @f(%a: i32 {lamina.arg = 1}, %b: f32) -> (i32, f32) {
    %r:2 = func.call @g(%a, %b) : (i32, f32) -> (i32, f32)
    func.return %r#0, %r#1 : i32, f32
  }
  func.func @g(%a: i32, %b: f32) -> (i32, f32) attributes {lamina.kind = "leaf"} {
    return %a, %b : i32, f32
  }
}
