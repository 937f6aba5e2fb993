// lamina-opt's command line behaves like mlir-opt's.
// RUN: lamina-opt --help | FileCheck %s --check-prefix=HELP
// RUN: lamina-opt --list-passes | FileCheck %s --check-prefix=LIST
// RUN: cat %s | lamina-opt --canonicalize --cse | FileCheck %s --check-prefix=STDIN
// RUN: lamina-opt %s -o %t.out && FileCheck %s --check-prefix=STDIN < %t.out
// RUN: not lamina-opt %s.missing 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: printf 'func.func @f() {\n  %%%%0 = "foo.bar"() : () -> i32\n' | not lamina-opt 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: printf '"foo.bar"() : () -> ()\n' | lamina-opt --allow-unregistered-dialect | FileCheck %s --check-prefix=UNREG

// HELP: --pass-pipeline
// HELP: --split-input-file
// HELP: --verify-diagnostics
// HELP: --mlir-print-op-generic
// HELP: --mlir-print-debuginfo
// HELP: --allow-unregistered-dialect
// HELP: --print-ir-after-all
// HELP: --timing
// HELP: --list-passes
// LIST-DAG: canonicalize
// LIST-DAG: cse
// LIST-DAG: symbol-dce
// LIST-DAG: inline
// STDIN: func.func @f
// MISSING: cannot read
// BAD: <stdin>:
// BAD-SAME: error:
// BAD-NOT: Traceback
// UNREG: "foo.bar"() : () -> ()
func.func @f() {
  return
}
