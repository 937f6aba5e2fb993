// RUN: not lamina-opt %s --pass-pipeline='builtin.module(func.func(cse,bogus))' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not lamina-opt %s --pass-pipeline='builtin.module(func.func(cse)' 2>&1 | FileCheck %s --check-prefix=PARENS
// RUN: not lamina-opt %s --pass-pipeline='builtin.module(canonicalize{max-iterations=many})' 2>&1 | FileCheck %s --check-prefix=OPTION

// UNKNOWN: 'bogus' does not refer to a registered pass or pass pipeline
// UNKNOWN-NEXT: func.func(cse,bogus)
// UNKNOWN-NEXT: {{^ +\^$}}
// PARENS: unbalanced parentheses
// OPTION: max-iterations
func.func @f() {
  return
}
