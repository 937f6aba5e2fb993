// cf canonicalization is byte-identical to mlir-opt-22's, pretty and generic (the input is
// transforms/cf-canonicalize.mlir, which also checks the output with FileCheck).
// REQUIRES: mlir-opt
// RUN: lamina-opt --canonicalize %S/../transforms/cf-canonicalize.mlir > %t.lam.mlir
// RUN: mlir-opt-22 --canonicalize %S/../transforms/cf-canonicalize.mlir > %t.ref.mlir
// RUN: diff %t.ref.mlir %t.lam.mlir
// RUN: lamina-opt --canonicalize --mlir-print-op-generic --mlir-print-debuginfo %S/../transforms/cf-canonicalize.mlir > %t.lamg.mlir
// RUN: mlir-opt-22 --canonicalize --mlir-print-op-generic --mlir-print-debuginfo %S/../transforms/cf-canonicalize.mlir > %t.refg.mlir
// RUN: diff %t.refg.mlir %t.lamg.mlir
