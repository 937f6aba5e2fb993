// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(cse,canonicalize))' --print-ir-after-all -o /dev/null 2>&1 | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(cse,canonicalize))' --print-ir-before=cse -o /dev/null 2>&1 | FileCheck %s --check-prefix=BEFORE

// CHECK: // -----// IR Dump After {{.*}} (cse) //----- //
// CHECK: func.func @f
// CHECK: // -----// IR Dump After {{.*}} (canonicalize) //----- //
// BEFORE: // -----// IR Dump Before {{.*}} (cse) //----- //
// BEFORE-NOT: IR Dump Before {{.*}} (canonicalize)
func.func @f(%x: i32) -> i32 {
  %0 = "arith.addi"(%x, %x) : (i32, i32) -> i32
  return %0 : i32
}
