// RUN: lamina-opt %s --split-input-file | FileCheck %s
// RUN: lamina-opt %s --split-input-file --mlir-print-op-generic | lamina-opt --split-input-file | FileCheck %s
// RUN: lamina-opt %s.invalid --split-input-file --verify-diagnostics

// Boolean properties are BoolAttr (`true`/`false`, as TPU-MLIR spells `do_relu = false`). Files
// written by earlier Lamina versions held them as `0 : i64` / `1 : i64`: those still parse and
// mean the same, and print as booleans.

// CHECK-LABEL: func.func @legacy
// CHECK: "top.Conv"({{.*}}) <{do_relu = true}>
// CHECK: "top.AvgPool"({{.*}}) <{ceil_mode = false, kernel_shape = array<i64: 2, 2>}>
// CHECK: "top.Reduce"({{.*}}) <{keepdims = false, mode = "ReduceMean"}>
func.func @legacy(%x: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x2x2xf32>, tensor<1x2xf32>) {
  %in = "top.Input"(%x) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %w = "top.Weight"() <{value = dense<1.0> : tensor<2x2x1x1xf32>}> : () -> tensor<2x2x1x1xf32>
  %n = "top.None"() : () -> none
  %c = "top.Conv"(%in, %w, %n) <{do_relu = 1 : i64}> : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x4x4xf32>
  %p = "top.AvgPool"(%in) <{ceil_mode = 0 : i64, kernel_shape = array<i64: 2, 2>}> : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  %a = "top.Weight"() <{value = dense<[2, 3]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %r = "top.Reduce"(%in, %a) {keepdims = 0 : i64, mode = "ReduceMean"} : (tensor<1x2x4x4xf32>, tensor<2xi64>) -> tensor<1x2xf32>
  return %c, %p, %r : tensor<1x2x4x4xf32>, tensor<1x2x2x2xf32>, tensor<1x2xf32>
}

// -----

// CHECK-LABEL: func.func @today
// CHECK: "top.Conv"({{.*}}) <{do_relu = true}>
// CHECK: "top.Gemm"({{.*}}) <{transA = false, transB = true}>
func.func @today(%x: tensor<1x2x4x4xf32>, %m: tensor<3x4xf32>, %v: tensor<5x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<3x5xf32>) {
  %w = "top.Weight"() <{value = dense<1.0> : tensor<2x2x1x1xf32>}> : () -> tensor<2x2x1x1xf32>
  %n = "top.None"() : () -> none
  %c = "top.Conv"(%x, %w, %n) <{do_relu = true}> : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x4x4xf32>
  %g = "top.Gemm"(%m, %v, %n) <{transA = false, transB = true}> : (tensor<3x4xf32>, tensor<5x4xf32>, none) -> tensor<3x5xf32>
  return %c, %g : tensor<1x2x4x4xf32>, tensor<3x5xf32>
}
