// Lamina's verifier errors are MLIR's: mlir-opt-22 reports the same errors on the same lines.
// REQUIRES: mlir-opt
// RUN: mlir-opt-22 %S/../ir/invalid-verify.mlir --split-input-file --verify-diagnostics
