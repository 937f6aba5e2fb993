// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(cse,canonicalize),symbol-dce)' --timing -o /dev/null 2>&1 | FileCheck %s

// CHECK: ... Execution time report ...
// CHECK: Total Execution Time:
// CHECK: Wall Time
// CHECK-DAG: Parser
// CHECK-DAG: 'func.func' Pipeline
// CHECK-DAG: CSE
// CHECK-DAG: Canonicalizer
// CHECK-DAG: SymbolDCE
// CHECK-DAG: Output
// CHECK: Total
func.func @f(%x: i32) -> i32 {
  return %x : i32
}
