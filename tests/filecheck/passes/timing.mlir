// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(cse,canonicalize),symbol-dce)' --timing -o /dev/null 2>&1 | FileCheck %s

// CHECK: ... Execution time report ...
// CHECK: Total Execution Time:
// CHECK: Wall Time
// CHECK-DAG: cse
// CHECK-DAG: canonicalize
// CHECK-DAG: symbol-dce
// CHECK: Total
func.func @f(%x: i32) -> i32 {
  return %x : i32
}
