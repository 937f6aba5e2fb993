// Folding arith's signed divisions and IEEE min/max at their edges: i64's most negative value is
// divided exactly (no wrap through abs), ceildivsi gives up where MLIR's folder does (an operand is
// the most negative value), division overflow (min / -1) is poison and never folds, and
// maximumf/minimumf order -0.0 below +0.0. interop/arith-fold-division-edges.mlir checks that
// mlir-opt-22 prints the same.
// RUN: lamina-opt --canonicalize %s | FileCheck %s

// CHECK-LABEL: func.func @edges
// CHECK-DAG: %[[NZ:.*]] = arith.constant -0.000000e+00 : f32
// CHECK-DAG: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[FLOOR:.*]] = arith.constant -3074457345618258603 : i64
// CHECK-DAG: %[[HALF:.*]] = arith.constant -4611686018427387904 : i64
// CHECK-DAG: %[[REM:.*]] = arith.constant -2 : i64
// CHECK: %[[CEIL:.*]] = arith.ceildivsi
// CHECK: %[[C32:.*]] = arith.ceildivsi
// CHECK: %[[F32:.*]] = arith.floordivsi
// CHECK: return %[[HALF]], %[[REM]], %[[CEIL]], %[[FLOOR]], %[[C32]], %[[F32]], %[[ZERO]], %[[Z]], %[[Z]], %[[NZ]], %[[NZ]]
func.func @edges() -> (i64, i64, i64, i64, i32, i32, i32, f32, f32, f32, f32) {
  %min = arith.constant -9223372036854775808 : i64
  %c2 = arith.constant 2 : i64
  %c3 = arith.constant 3 : i64
  %a = arith.divsi %min, %c2 : i64
  %b = arith.remsi %min, %c3 : i64
  %c = arith.ceildivsi %min, %c3 : i64
  %d = arith.floordivsi %min, %c3 : i64
  %min32 = arith.constant -2147483648 : i32
  %m132 = arith.constant -1 : i32
  %e = arith.ceildivsi %min32, %m132 : i32
  %f = arith.floordivsi %min32, %m132 : i32
  %g = arith.remsi %min32, %m132 : i32
  %z = arith.constant 0.0 : f32
  %nz = arith.constant -0.0 : f32
  %h = arith.maximumf %nz, %z : f32
  %i = arith.maximumf %z, %nz : f32
  %j = arith.minimumf %z, %nz : f32
  %k = arith.minimumf %nz, %z : f32
  return %a, %b, %c, %d, %e, %f, %g, %h, %i, %j, %k : i64, i64, i64, i64, i32, i32, i32, f32, f32, f32, f32
}
