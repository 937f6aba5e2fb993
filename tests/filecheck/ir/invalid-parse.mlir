// RUN: lamina-opt %s --split-input-file --verify-diagnostics

func.func @f() {
  // expected-error @+1 {{use of undeclared SSA value name}}
  "func.return"(%nope) : (i32) -> ()
}

// -----

// expected-note @+1 {{prior use here}}
func.func @f(%x: i32) {
  // expected-error @+1 {{expects different type than prior uses}}
  "func.return"(%x) : (f32) -> ()
}

// -----

// expected-error @+1 {{operation being parsed with an unregistered dialect}}
"lam_ext.op"() : () -> ()

// -----

// expected-error @+1 {{unregistered operation 'arith.nope' found in dialect ('arith') that does not allow unknown operations}}
"arith.nope"() : () -> ()

// -----

func.func @f() {
  // expected-note @+1 {{previously defined here}}
  %0 = "arith.constant"() <{value = 1 : i32}> : () -> i32
  // expected-error @+1 {{redefinition of SSA value '%0'}}
  %0 = "arith.constant"() <{value = 2 : i32}> : () -> i32
  "func.return"() : () -> ()
}

// -----

// expected-error @+1 {{expected}}
func.func @f( {
