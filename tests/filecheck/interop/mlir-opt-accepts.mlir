// Upstream mlir-opt-22 accepts what Lamina prints, in every printing mode, and Lamina parses what
// mlir-opt-22 prints back to identical text.
// REQUIRES: mlir-opt
// RUN: lamina-opt %s --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo > %t.lam.mlir
// RUN: mlir-opt-22 --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo %t.lam.mlir > %t.mlir.mlir
// RUN: diff %t.lam.mlir %t.mlir.mlir
// RUN: lamina-opt %s --allow-unregistered-dialect > %t.custom.mlir
// RUN: mlir-opt-22 --allow-unregistered-dialect %t.custom.mlir -o /dev/null
// RUN: mlir-opt-22 --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo %s | lamina-opt --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo > %t.back.mlir
// RUN: diff %t.back.mlir %t.mlir.mlir
module {
  func.func @main(%arg0: tensor<2x3xf32>, %arg1: i1, %arg2: index) -> (tensor<2x3xf32>, i32) {
    %c = "arith.constant"() <{value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]]> : tensor<2x3xf32>}> : () -> tensor<2x3xf32>
    %0 = "arith.addf"(%arg0, %c) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %1 = "arith.index_cast"(%arg2) : (index) -> i32
    %2 = "arith.constant"() <{value = 7 : i32}> : () -> i32
    %3 = "arith.cmpi"(%1, %2) <{predicate = 2 : i64}> : (i32, i32) -> i1
    %4 = "arith.select"(%3, %1, %2) : (i1, i32, i32) -> i32
    %5 = "lam_ext.custom"(%0) <{axes = array<i64: 0, 1>, mode = "nearest"}> {lam_ext.hint = 0.25 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("resize"("model.onnx":12:0))
    "cf.cond_br"(%arg1, %4)[^bb1, ^bb2] <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (i1, i32) -> ()
  ^bb1(%6: i32):
    "func.return"(%5, %6) : (tensor<2x3xf32>, i32) -> ()
  ^bb2:
    "func.return"(%0, %2) : (tensor<2x3xf32>, i32) -> ()
  }
}
