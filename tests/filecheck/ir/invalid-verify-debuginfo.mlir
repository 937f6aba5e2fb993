// RUN: lamina-opt %s --verify-diagnostics
// RUN: not lamina-opt %s 2>&1 | FileCheck %s

// A module as model_transform writes it: every op located at its ONNX node. A verifier error in
// an op the user edited is reported at the line and column of this file (with the source line
// and a caret), and a note at the op's own location names the node it comes from.

// CHECK: invalid-verify-debuginfo.mlir:18:10: error: 'top.Permute' op order [0, 1, 7] is not a permutation of 2 dims
// CHECK-NEXT: {{^}}    %1 = "top.Permute"(%0)
// CHECK-NEXT: {{^}}         ^
// CHECK-NEXT: m.onnx:0:0: note: the op comes from 'perm'
#loc1 = loc("m.onnx":0:0)
module {
  func.func @main(%arg0: tensor<1x4xf32> loc("in"(#loc1))) -> tensor<1x4xf32> {
    %0 = "top.Input"(%arg0) : (tensor<1x4xf32>) -> tensor<1x4xf32> loc(#loc2)
    // expected-error @+2 {{'top.Permute' op order [0, 1, 7] is not a permutation of 2 dims}}
    // expected-note @unknown {{the op comes from 'perm'}}
    %1 = "top.Permute"(%0) <{order = array<i64: 0, 1, 7>}> : (tensor<1x4xf32>) -> tensor<1x4xf32> loc(#loc3)
    return %1 : tensor<1x4xf32> loc(#loc1)
  } loc(#loc1)
} loc(#loc1)
#loc2 = loc("in"(#loc1))
#loc3 = loc("perm"(#loc1))
