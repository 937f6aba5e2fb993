// A call of a known function value becomes a direct call (MLIR's
// SimplifyIndirectCallWithKnownCallee); the constant is then dead. Like mlir-opt-22, the call keeps
// none of the indirect call's attributes, res_attrs included.
// RUN: lamina-opt --canonicalize %s | FileCheck %s

func.func private @sq(i64) -> i64

// CHECK-LABEL: func.func @main
// CHECK-NOT: constant
// CHECK: %[[R:.*]] = call @sq(%arg0) : (i64) -> i64
// CHECK: %[[S:.*]] = call @sq(%[[R]]) : (i64) -> i64
// CHECK: return %[[R]], %[[S]]
func.func @main(%a: i64) -> (i64, i64) {
  %f = func.constant @sq : (i64) -> i64
  %r = func.call_indirect %f(%a) : (i64) -> i64
  %s = "func.call_indirect"(%f, %r) <{res_attrs = [{onnx.name = "s"}]}> {foo} : ((i64) -> i64, i64) -> i64
  return %r, %s : i64, i64
}
