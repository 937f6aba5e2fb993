// cf.switch prints, re-parses and prints generically exactly as mlir-opt-22 does: case values
// printed unsigned at the flag's width (-3 : i32 is 4294967293), no newline before ']' without
// cases; the generic form's case_values vector, case_operand_segments and operandSegmentSizes.
// REQUIRES: mlir-opt
// RUN: lamina-opt %s > %t.lam.mlir
// RUN: mlir-opt-22 %s > %t.ref.mlir
// RUN: diff %t.ref.mlir %t.lam.mlir
// RUN: lamina-opt %t.ref.mlir > %t.lam2.mlir
// RUN: diff %t.ref.mlir %t.lam2.mlir
// RUN: lamina-opt --mlir-print-op-generic --mlir-print-debuginfo %s > %t.lamg.mlir
// RUN: mlir-opt-22 --mlir-print-op-generic --mlir-print-debuginfo %s > %t.refg.mlir
// RUN: diff %t.refg.mlir %t.lamg.mlir
// RUN: lamina-opt %t.refg.mlir > %t.lam3.mlir
// RUN: diff %t.ref.mlir %t.lam3.mlir
func.func @main(%flag: i32, %a: i32, %b: i32) -> i32 {
  cf.switch %flag : i32, [
    default: ^bb1(%a : i32),
    42: ^bb2(%b, %a : i32, i32),
    -3: ^bb3
  ]
^bb1(%x: i32):
  return %x : i32
^bb2(%y: i32, %z: i32):
  %s = arith.addi %y, %z : i32
  return %s : i32
^bb3:
  %c = arith.constant 7 : i32
  return %c : i32
}
func.func @nocase(%flag: i64) -> i64 {
  cf.switch %flag : i64, [
    default: ^bb1
  ]
^bb1:
  return %flag : i64
}
