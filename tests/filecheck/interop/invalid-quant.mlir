// Lamina's invalid quant types are MLIR's: mlir-opt-22 reports the same errors on the same lines.
// REQUIRES: mlir-opt
// RUN: mlir-opt-22 %S/../ir/invalid-quant.mlir --split-input-file --verify-diagnostics
