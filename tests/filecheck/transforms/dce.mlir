// RUN: lamina-opt %s --allow-unregistered-dialect --dce --mlir-print-op-generic | FileCheck %s

// CHECK-LABEL: sym_name = "f"
func.func @f(%x: f32) -> f32 {
  // Unused pure ops go, unregistered ops (unknown effects) stay.
  // CHECK-NOT: "arith.mulf"
  // CHECK: "lam_ext.effect"
  // CHECK: "func.return"
  %0 = "arith.mulf"(%x, %x) : (f32, f32) -> f32
  %1 = "arith.addf"(%0, %x) : (f32, f32) -> f32
  %2 = "lam_ext.effect"(%x) : (f32) -> f32
  "func.return"(%x) : (f32) -> ()
}
