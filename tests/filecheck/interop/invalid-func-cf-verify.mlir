// mlir-opt-22 reports the same verifier errors as Lamina on ir/invalid-func-cf-verify.mlir.
// REQUIRES: mlir-opt
// RUN: mlir-opt-22 %S/../ir/invalid-func-cf-verify.mlir --split-input-file --verify-diagnostics
