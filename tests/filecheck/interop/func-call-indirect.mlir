// func.constant and func.call_indirect print, re-parse and canonicalize exactly as mlir-opt-22 does
// (the constant's result is named %f; a call of a known function value becomes func.call, dropping
// discardable attributes).
// REQUIRES: mlir-opt
// RUN: lamina-opt %s > %t.lam.mlir
// RUN: mlir-opt-22 %s > %t.ref.mlir
// RUN: diff %t.ref.mlir %t.lam.mlir
// RUN: lamina-opt %t.ref.mlir > %t.lam2.mlir
// RUN: diff %t.ref.mlir %t.lam2.mlir
// RUN: lamina-opt --mlir-print-op-generic --mlir-print-debuginfo %s > %t.lamg.mlir
// RUN: mlir-opt-22 --mlir-print-op-generic --mlir-print-debuginfo %s > %t.refg.mlir
// RUN: diff %t.refg.mlir %t.lamg.mlir
// RUN: lamina-opt --canonicalize %s > %t.lamc.mlir
// RUN: mlir-opt-22 --canonicalize %s > %t.refc.mlir
// RUN: diff %t.refc.mlir %t.lamc.mlir
func.func @sq(%x: i64) -> i64 {
  %r = arith.muli %x, %x : i64
  return %r : i64
}
func.func @main(%a: i64) -> (i64, i64) {
  %f = func.constant @sq : (i64) -> i64
  %r = func.call_indirect %f(%a) : (i64) -> i64
  %g = func.call_indirect %f(%r) {foo} : (i64) -> i64
  return %r, %g : i64, i64
}
