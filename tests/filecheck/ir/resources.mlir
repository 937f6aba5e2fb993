// dense_resource blobs round-trip through the resources section, or through an external weight file.
// RUN: lamina-opt %s | FileCheck %s
// RUN: lamina-opt %s | lamina-opt | FileCheck %s
// RUN: lamina-opt %s --external-weights=w.npz -o %t.mlir && FileCheck %s --check-prefix=EXT < %t.mlir
// RUN: lamina-opt %t.mlir | FileCheck %s

// CHECK: %cst = arith.constant dense_resource<weights> : tensor<2xf32>
// CHECK: {-#
// CHECK-NEXT:   dialect_resources: {
// CHECK-NEXT:     builtin: {
// CHECK-NEXT:       weights: "0x040000000000803F00000040"
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: #-}
// EXT: lamina.weight_file = "w.npz"
// EXT-NOT: dialect_resources
module {
  func.func @f() -> tensor<2xf32> {
    %0 = "arith.constant"() <{value = dense_resource<weights> : tensor<2xf32>}> : () -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      weights: "0x040000000000803F00000040"
    }
  }
#-}
