// The verifier of func.constant, func.call_indirect's operands and cf.switch gives MLIR's messages
// (interop/invalid-func-cf-verify.mlir checks that mlir-opt-22 reports the same on the same lines).
// RUN: lamina-opt %s --split-input-file --verify-diagnostics

func.func private @sq(i64) -> i64
func.func @a() {
  // expected-error @+1 {{'func.constant' op reference to undefined function 'nope'}}
  %f = func.constant @nope : (i64) -> i64
  return
}

// -----

func.func private @sq(i64) -> i64
func.func @b() {
  // expected-error @+1 {{'func.constant' op reference to function with mismatched type}}
  %f = func.constant @sq : (i32) -> i64
  return
}

// -----

func.func @c(%flag: i32) {
  // expected-error @+1 {{'cf.switch' op 'flag' type ('i32') should match case value type ('i64')}}
  "cf.switch"(%flag)[^bb1, ^bb1] <{case_operand_segments = array<i32: 0>, case_values = dense<[1]> : vector<1xi64>, operandSegmentSizes = array<i32: 1, 0, 0>}> : (i32) -> ()
^bb1:
  return
}

// -----

func.func @d(%flag: i32) {
  // expected-error @+1 {{'cf.switch' op number of case values (1) should match number of case destinations (2)}}
  "cf.switch"(%flag)[^bb1, ^bb1, ^bb1] <{case_operand_segments = array<i32: 0, 0>, case_values = dense<[1]> : vector<1xi32>, operandSegmentSizes = array<i32: 1, 0, 0>}> : (i32) -> ()
^bb1:
  return
}

// -----

func.func @e(%flag: i32, %x: i32) {
  // expected-error @+1 {{branch has 1 operands for successor #1, but target block has 0}}
  cf.switch %flag : i32, [
    default: ^bb1,
    3: ^bb1(%x : i32)
  ]
^bb1:
  return
}
