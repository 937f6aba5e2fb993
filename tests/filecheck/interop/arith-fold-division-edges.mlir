// arith folding at the edges of signed division and IEEE min/max is byte-identical to mlir-opt-22's
// (the input is transforms/arith-fold-division-edges.mlir, which also checks it with FileCheck).
// REQUIRES: mlir-opt
// RUN: lamina-opt --canonicalize %S/../transforms/arith-fold-division-edges.mlir > %t.lam.mlir
// RUN: mlir-opt-22 --canonicalize %S/../transforms/arith-fold-division-edges.mlir > %t.ref.mlir
// RUN: diff %t.ref.mlir %t.lam.mlir
