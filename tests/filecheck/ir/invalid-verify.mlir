// RUN: lamina-opt %s --split-input-file --verify-diagnostics
// mlir-opt-22 reports the same errors on the same lines: tests/filecheck/interop/invalid-verify.mlir

func.func @f(%x: i32) -> i64 {
  // expected-error @+1 {{'arith.addi' op requires the same type for all operands and results}}
  %0 = "arith.addi"(%x, %x) : (i32, i32) -> i64
  "func.return"(%0) : (i64) -> ()
}

// -----

func.func @f(%x: i32) -> i32 {
  // expected-error @+1 {{operand #0 does not dominate this use}}
  %0 = "arith.addi"(%1, %x) : (i32, i32) -> i32
  // expected-note @+1 {{operand defined here}}
  %1 = "arith.addi"(%x, %x) : (i32, i32) -> i32
  "func.return"(%0) : (i32) -> ()
}

// -----

func.func @f(%x: i32) -> f32 {
  // expected-error @+1 {{type of return operand 0 ('i32') doesn't match function result type ('f32') in function @f}}
  "func.return"(%x) : (i32) -> ()
}

// -----

func.func @f() {
  // expected-error @+1 {{'func.return' op must be the last operation in the parent block}}
  "func.return"() : () -> ()
  "func.return"() : () -> ()
}

// -----

// expected-note @+1 {{see existing symbol definition here}}
func.func @dup() {
  "func.return"() : () -> ()
}
// expected-error @+1 {{redefinition of symbol named 'dup'}}
func.func @dup() {
  "func.return"() : () -> ()
}

// -----

func.func @f() {
  // expected-error @+1 {{'func.call' op 'missing' does not reference a valid function}}
  "func.call"() <{callee = @missing}> : () -> ()
  "func.return"() : () -> ()
}

// -----

// expected-error @+1 {{'func.func' op entry block must have 1 arguments to match function signature}}
"func.func"() <{function_type = (i32) -> (), sym_name = "g"}> ({
  "func.return"() : () -> ()
}) : () -> ()

// -----

func.func @f(%x: i32) {
  // One error (MLIR's), not also the terminator trait's nor "block with no terminator".
  // expected-error @+1 {{operation with block successors must terminate its parent block}}
  "cf.br"()[^bb1] : () -> ()
  %0 = "arith.addi"(%x, %x) : (i32, i32) -> i32
^bb1:
  return
}

// -----

// expected-error @+1 {{'func.func' op type of entry block argument #0('f32') must match the type of the corresponding argument in function signature('i32')}}
"func.func"() <{function_type = (i32) -> (), sym_name = "d"}> ({
^bb0(%a: f32):
  "func.return"() : () -> ()
}) : () -> ()

// -----

func.func @f() {
  // One error per op, for its first operand that does not dominate the use (as MLIR).
  // expected-error @+2 {{operand #0 does not dominate this use}}
  // expected-note @+1 {{operand defined here (op in the same block)}}
  %0 = "arith.addi"(%0, %0) : (i32, i32) -> i32
  return
}

// -----

// The body of an op that failed verification is not verified (as MLIR): no cascade of errors.
// expected-error @+1 {{'builtin.module' op attribute 'sym_name' failed to satisfy constraint}}
"builtin.module"() ({
  "func.return"() : () -> ()
}) {sym_name = 3 : i32} : () -> ()

// -----

// expected-error @+1 {{'builtin.module' op expects region #0 to have 0 or 1 blocks}}
"builtin.module"() ({
^bb0:
  "func.func"() <{function_type = () -> (), sym_name = "k"}> ({
    "func.return"() : () -> ()
  }) : () -> ()
^bb1:
}) : () -> ()
