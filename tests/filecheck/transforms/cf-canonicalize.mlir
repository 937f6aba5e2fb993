// RUN: lamina-opt --canonicalize %s | FileCheck %s

// cf canonicalization: branches through blocks that only branch on are collapsed (MLIR's
// SimplifyPassThroughBr / SimplifyPassThroughCondBranch), a cond_br to one block with different
// operands becomes arith.select when it is that block's only predecessor, and single-predecessor
// blocks are merged. The expected output is mlir-opt-22's (interop/cf-canonicalize.mlir diffs them).

// CHECK-LABEL: func.func @pass_through(
// CHECK-NEXT: %0 = arith.select %arg0, %arg1, %arg2 : i32
// CHECK-NEXT: return %0 : i32
func.func @pass_through(%c: i1, %x: i32, %y: i32) -> i32 {
  cf.cond_br %c, ^bb1, ^bb2(%y : i32)
^bb1:
  cf.br ^bb2(%x : i32)
^bb2(%v: i32):
  cf.br ^bb3(%v : i32)
^bb3(%w: i32):
  return %w : i32
}

// The loop keeps its header and body; the latch block that only forwarded its argument is gone.
// CHECK-LABEL: func.func @loop(
// CHECK: cf.br ^bb1(%c0_i32 : i32)
// CHECK: ^bb1(%0: i32):  // 2 preds: ^bb0, ^bb2
// CHECK: cf.cond_br %1, ^bb3(%0 : i32), ^bb2
// CHECK: ^bb2:  // pred: ^bb1
// CHECK-NEXT: %2 = arith.addi %0, %c1_i32 : i32
// CHECK-NEXT: cf.br ^bb1(%2 : i32)
func.func @loop(%n: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  cf.br ^hdr(%c0 : i32)
^hdr(%i: i32):
  %done = arith.cmpi sge, %i, %n : i32
  cf.cond_br %done, ^exit(%i : i32), ^body
^body:
  %j = arith.addi %i, %c1 : i32
  cf.br ^latch(%j : i32)
^latch(%k: i32):
  cf.br ^hdr(%k : i32)
^exit(%r: i32):
  return %r : i32
}

// A branch to itself is an infinite loop and stays.
// CHECK-LABEL: func.func @infinite(
// CHECK-NEXT: cf.br ^bb1
// CHECK-NEXT: ^bb1:  // 2 preds: ^bb0, ^bb1
// CHECK-NEXT: cf.br ^bb1
func.func @infinite() {
  cf.br ^bb1
^bb1:
  cf.br ^bb1
}

// ^bb1 only forwards its argument; ^bb2's is also used by an addi, so ^bb2 stays.
// CHECK-LABEL: func.func @arg_used_elsewhere(
// CHECK-NEXT: cf.cond_br %arg0, ^bb2(%arg1, %arg1 : i32, i32), ^bb1(%arg1 : i32)
func.func @arg_used_elsewhere(%c: i1, %x: i32) -> i32 {
  cf.cond_br %c, ^bb1(%x : i32), ^bb2(%x : i32)
^bb1(%a: i32):
  cf.br ^bb3(%a, %a : i32, i32)
^bb2(%b: i32):
  %s = arith.addi %b, %b : i32
  cf.br ^bb3(%s, %b : i32, i32)
^bb3(%p: i32, %q: i32):
  %r = arith.muli %p, %q : i32
  return %r : i32
}

// CHECK-LABEL: func.func @two_selects(
// CHECK-NEXT: %0 = arith.select %arg0, %arg1, %arg2 : i32
// CHECK-NEXT: %1 = arith.select %arg0, %arg3, %arg4 : f32
// CHECK-NEXT: return %0, %1 : i32, f32
func.func @two_selects(%c: i1, %x: i32, %y: i32, %z: f32, %w: f32) -> (i32, f32) {
  cf.cond_br %c, ^bb1(%x, %z : i32, f32), ^bb1(%y, %w : i32, f32)
^bb1(%a: i32, %b: f32):
  return %a, %b : i32, f32
}

// CHECK-LABEL: func.func @chain(
// CHECK-NEXT: return %arg0 : i32
func.func @chain(%x: i32) -> i32 {
  cf.br ^a
^a:
  cf.br ^b
^b:
  cf.br ^c(%x : i32)
^c(%v: i32):
  cf.br ^d(%v : i32)
^d(%u: i32):
  return %u : i32
}

// The join block has two predecessor blocks: no select, the inner cond_br keeps both edges to it.
// CHECK-LABEL: func.func @cond_pass(
// CHECK-NEXT: cf.cond_br %arg0, ^bb2(%arg2 : i32), ^bb1
// CHECK: cf.cond_br %arg1, ^bb2(%arg3 : i32), ^bb2(%arg2 : i32)
// CHECK: ^bb2(%0: i32):  // 3 preds: ^bb0, ^bb1, ^bb1
func.func @cond_pass(%c: i1, %d: i1, %x: i32, %y: i32) -> i32 {
  cf.cond_br %c, ^bb1, ^bb2
^bb1:
  cf.br ^bb3(%x : i32)
^bb2:
  cf.cond_br %d, ^bb3(%y : i32), ^bb4
^bb4:
  cf.br ^bb3(%x : i32)
^bb3(%r: i32):
  %s = arith.addi %r, %r : i32
  return %s : i32
}
