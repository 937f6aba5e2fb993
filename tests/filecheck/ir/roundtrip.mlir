// Generic form printed by Lamina parses back to the same text (print -> parse -> print is stable).
// RUN: lamina-opt %s --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo > %t.1.mlir
// RUN: lamina-opt %t.1.mlir --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: lamina-opt %s --allow-unregistered-dialect > %t.3.mlir
// RUN: lamina-opt %t.3.mlir --allow-unregistered-dialect > %t.4.mlir
// RUN: diff %t.3.mlir %t.4.mlir
// RUN: FileCheck %s < %t.1.mlir

// CHECK: "builtin.module"() ({
// CHECK: "func.func"() <{function_type = (tensor<1x3x224x224xf32>, i1) -> tensor<1x64x112x112xf32>, sym_name = "net"}> ({
// CHECK: ^bb0(%arg0: tensor<1x3x224x224xf32> loc({{.*}}), %arg1: i1 loc({{.*}})):
// CHECK: "lam_ext.conv"(%arg0) <{kernel = array<i64: 7, 7>, pads = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>}> {lam_ext.note = "stem"} : (tensor<1x3x224x224xf32>) -> tensor<1x64x112x112xf32> loc(#loc
// CHECK: %{{.*}}:2 = "lam_ext.split"
// CHECK: "lam_ext.region_op"
// CHECK: "lam_ext.yield"
// CHECK: #loc{{[0-9]*}} = loc("conv1")
module {
  func.func @net(%x: tensor<1x3x224x224xf32>, %flag: i1) -> tensor<1x64x112x112xf32> {
    %0 = "lam_ext.conv"(%x) <{kernel = array<i64: 7, 7>, strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>}> {lam_ext.note = "stem"} : (tensor<1x3x224x224xf32>) -> tensor<1x64x112x112xf32> loc("conv1")
    %1:2 = "lam_ext.split"(%0) {axis = 1 : i64} : (tensor<1x64x112x112xf32>) -> (tensor<1x32x112x112xf32>, tensor<1x32x112x112xf32>) loc(fused["split", "model.onnx":3:0])
    %2 = "lam_ext.region_op"(%flag) ({
    ^bb0(%a: tensor<1x64x112x112xf32>):
      "lam_ext.yield"(%a) : (tensor<1x64x112x112xf32>) -> ()
    }) : (i1) -> tensor<1x64x112x112xf32> loc(callsite("inner" at "outer"))
    %3 = "lam_ext.types"() {i = 3 : i4, u = 7 : ui8, s = -1 : si8, h = 1.5 : f16, b = 2.5 : bf16, f8 = 0.5 : f8E4M3FN, g = 1.0 : f8E5M2, t = tuple<i32, f32>, dyn = tensor<?x3xf32>, unr = tensor<*xf32>, idx = 5 : index, arr = [1, "two", 3.0 : f64], sym = @net::@inner, flag, dict = {b = 1 : i32, a = 2 : i32}, str = "quote\22 and \0A newline"} : () -> (none)
    "func.return"(%0) : (tensor<1x64x112x112xf32>) -> ()
  }
}
