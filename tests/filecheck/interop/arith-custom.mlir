// Custom (pretty) forms of arith and cf: Lamina prints exactly what mlir-opt-22 prints (SSA name hints
// such as %c3_i32 / %cst / %true with _N uniquing, flags, predicates, block labels and pred comments),
// with and without debuginfo; generic forms stay identical; Lamina re-prints mlir-opt's output verbatim.
// REQUIRES: mlir-opt
// RUN: lamina-opt --allow-unregistered-dialect %s > %t.lam.mlir
// RUN: mlir-opt-22 --allow-unregistered-dialect %s > %t.ref.mlir
// RUN: diff %t.ref.mlir %t.lam.mlir
// RUN: lamina-opt --allow-unregistered-dialect --mlir-print-debuginfo %s > %t.lamd.mlir
// RUN: mlir-opt-22 --allow-unregistered-dialect --mlir-print-debuginfo %s > %t.refd.mlir
// RUN: diff %t.refd.mlir %t.lamd.mlir
// RUN: lamina-opt --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo %s > %t.lamg.mlir
// RUN: mlir-opt-22 --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo %s > %t.refg.mlir
// RUN: diff %t.refg.mlir %t.lamg.mlir
// RUN: lamina-opt --allow-unregistered-dialect %t.ref.mlir | diff %t.ref.mlir -
// RUN: lamina-opt --allow-unregistered-dialect --mlir-print-debuginfo %t.refd.mlir | diff %t.refd.mlir -
// RUN: lamina-opt --allow-unregistered-dialect --mlir-print-op-generic --mlir-print-debuginfo %t.refd.mlir | diff %t.refg.mlir -
// RUN: lamina-opt --allow-unregistered-dialect %s | FileCheck %s

// CHECK-LABEL: func.func @f(
// CHECK: %c3_i32 = arith.constant 3 : i32
// CHECK-NEXT: %c3_i32_0 = arith.constant 3 : i32
// CHECK-NEXT: %c-7_i64 = arith.constant -7 : i64
// CHECK-NEXT: %c0 = arith.constant 0 : index
// CHECK: %true = arith.constant true
// CHECK-NEXT: %false = arith.constant false
// CHECK-NEXT: %cst = arith.constant 1.500000e+00 : f32
// CHECK-NEXT: %cst_1 = arith.constant 2.000000e+00 : f64
// CHECK: arith.muli %arg0, %arg1 overflow<nsw, nuw> : i32
// CHECK: arith.subf %arg2, %arg3 fastmath<nnan,ninf> : f32
// CHECK: arith.cmpi slt, %arg0, %arg1 : i32
// CHECK: arith.select %13, %arg6, %cst_3 : vector<4xi1>, vector<4xi32>
// CHECK: arith.index_cast %arg0 : i32 to index
// CHECK-LABEL: func.func @g(
// CHECK: cf.cond_br %arg0, ^bb1(%arg1 : i32), ^bb2
// CHECK: ^bb1(%0: i32):  // pred: ^bb0
// CHECK: ^bb3(%2: i32, %3: i32):  // 3 preds: ^bb1, ^bb2, ^bb2
func.func @f(%a: i32, %b: i32, %x: f32, %y: f32, %i: index, %t: tensor<4xf32>, %v: vector<4xi32>) -> i32 {
  %c3 = arith.constant 3 : i32
  %c3b = arith.constant 3 : i32
  %cm = arith.constant -7 : i64
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cn = arith.constant -1 : index
  %t1 = arith.constant true
  %f1 = arith.constant false
  %fc = arith.constant 1.5 : f32
  %fc2 = arith.constant 2.0 : f64
  %ui = arith.constant 5 : i8
  %d = arith.constant dense<1.0> : tensor<4xf32>
  %d2 = arith.constant dense<[1, 2, 3, 4]> : vector<4xi32>
  %d3 = arith.constant dense<[true, false]> : tensor<2xi1>
  %0 = arith.addi %a, %b : i32
  %1 = arith.addi %a, %b overflow<nsw> : i32
  %2 = arith.muli %a, %b overflow<nsw, nuw> : i32
  %3 = arith.subi %a, %c3 overflow<nuw> : i32
  %4 = arith.shli %a, %b overflow<nsw> : i32
  %5 = arith.divsi %a, %b : i32
  %6 = arith.andi %a, %b : i32
  %7 = arith.addf %x, %y : f32
  %8 = arith.mulf %x, %y fastmath<fast> : f32
  %9 = arith.subf %x, %y fastmath<nnan,ninf> : f32
  %10 = arith.negf %x : f32
  %11 = arith.negf %x fastmath<nsz> : f32
  %12 = arith.cmpi slt, %a, %b : i32
  %13 = arith.cmpi eq, %v, %d2 : vector<4xi32>
  %14 = arith.cmpf olt, %x, %y : f32
  %15 = arith.cmpf ueq, %x, %y fastmath<fast> : f32
  %16 = arith.select %12, %a, %b : i32
  %17 = arith.select %13, %v, %d2 : vector<4xi1>, vector<4xi32>
  %18 = arith.extsi %a : i32 to i64
  %19 = arith.trunci %18 : i64 to i16
  %t19 = arith.trunci %18 overflow<nsw> : i64 to i16
  %20 = arith.index_cast %a : i32 to index
  %21 = arith.index_castui %i : index to i64
  %22 = arith.bitcast %x : f32 to i32
  %23 = arith.sitofp %a : i32 to f32
  %24 = arith.fptosi %x : f32 to i32
  %25 = arith.extf %x : f32 to f64
  %26 = arith.truncf %25 : f64 to f32
  %27 = arith.truncf %25 fastmath<fast> : f64 to f32
  %28 = arith.addi %a, %b {foo = 1 : i32} : i32
  %29 = arith.maximumf %t, %d : tensor<4xf32>
  %30 = arith.extui %a : i32 to i64
  %31 = arith.uitofp %a : i32 to f32
  %32 = arith.fptoui %x : f32 to i32
  %33 = arith.remf %x, %y : f32
  %34 = arith.ceildivsi %a, %b : i32
  %35 = arith.truncf %25 to_nearest_even : f64 to f32
  return %0 : i32
}
func.func @g(%c: i1, %a: i32) -> i32 {
  %k = arith.constant {foo} 3 : i32
  cf.assert %c, "boom"
  cf.assert %c, "with \"quote\"" {bar = 1 : i32}
  cf.cond_br %c, ^bb1(%a : i32), ^bb2
^bb1(%x: i32):
  %c1 = arith.constant 1 : i32
  %s = arith.addi %x, %c1 : i32
  cf.br ^bb3(%s, %x : i32, i32)
^bb2:
  %c1b = arith.constant 1 : i32
  %t = arith.constant true
  cf.cond_br %t, ^bb3(%c1b, %c1b : i32, i32), ^bb3(%a, %a : i32, i32) {attr}
^bb3(%y: i32, %z: i32):
  cf.br ^bb4
^bb4:
  return %y : i32
}
func.func @h() -> index {
  %c0 = arith.constant 0 : index
  %c0_0 = arith.constant 0 : index
  %cst = arith.constant 1.0 : f32
  return %c0 : index
}
func.func @r(%x: f64, %t: tensor<2xi1>, %a: tensor<2xf32>) {
  %0 = arith.truncf %x downward : f64 to f32
  %1 = arith.truncf %x upward fastmath<nnan> : f64 to f32
  %2 = arith.truncf %x toward_zero : f64 to f32
  %3 = arith.truncf %x to_nearest_away : f64 to f32
  %4 = arith.select %t, %a, %a : tensor<2xi1>, tensor<2xf32>
  %5 = arith.cmpf oeq, %a, %a : tensor<2xf32>
  %6 = arith.constant 255 : i8
  %7 = arith.constant 0x7FC00000 : f32
  %8 = arith.constant dense<[[1.0, 2.0]]> : tensor<1x2xf16>
  %9 = arith.constant dense<0> : tensor<3xindex>
  %10 = arith.constant 9223372036854775807 : i64
  %11 = arith.constant -1 : i1
  %12 = arith.extf %x fastmath<contract> : f64 to f128
  %13 = arith.constant 1 : i128
  %14 = arith.addf %a, %a fastmath<reassoc,nnan,ninf,nsz,arcp,contract,afn> : tensor<2xf32>
  %15 = arith.addf %a, %a fastmath<none> : tensor<2xf32>
  %16 = arith.addi %13, %13 overflow<none> : i128
  %17 = arith.cmpi uge, %13, %13 {x} : i128
  return
}
func.func @exact(%a: i32, %b: i32) {
  %0 = arith.divsi %a, %b exact : i32
  %1 = arith.shrui %a, %b exact : i32
  return
}
func.func @n(%a: i32) -> i32 {
  %c1 = arith.constant 1 : i32
  %c1b = arith.constant 1 : i32
  %r = "test.region"() ({
    %c1c = arith.constant 1 : i32
    %x = arith.addi %c1c, %a : i32
    "test.region"() ({
    ^bb0(%q: i32):
      %c1d = arith.constant 1 : i32
      %c2 = arith.constant 2 : i32
      "test.yield"(%c1d) : (i32) -> ()
    }) : () -> ()
    "test.yield"(%x) : (i32) -> ()
  }, {
  ^bb0(%z: i32):
    %c1e = arith.constant 1 : i32
    %c1f = arith.constant 1 : i32
    "test.yield"(%c1e) : (i32) -> ()
  }) : () -> i32
  %c1g = arith.constant 1 : i32
  %s:2 = "test.two"() : () -> (i32, i32)
  %cst = arith.constant 1.0 : f32
  %t = "test.region"() ({
    %cst2 = arith.constant 1.0 : f32
    "test.yield"(%cst2) : (f32) -> ()
  }) : () -> i32
  return %r : i32
}
