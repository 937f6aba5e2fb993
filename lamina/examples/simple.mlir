// The built-in example of `lamina example`: a tiny program with work for every built-in pass.
// inline folds @scale into @main; canonicalize folds the constants; cse merges the duplicate
// multiply; symbol-dce drops the private @unused function.
module {
  func.func private @scale(%x: tensor<4xf32>) -> tensor<4xf32> {
    %c = "arith.constant"() <{value = dense<2.0> : tensor<4xf32>}> : () -> tensor<4xf32>
    %y = "arith.mulf"(%x, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func private @unused(%x: i32) -> i32 {
    return %x : i32
  }
  func.func @main(%arg0: tensor<4xf32>, %n: i32) -> (tensor<4xf32>, i32) {
    %0 = call @scale(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "arith.mulf"(%0, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %2 = "arith.mulf"(%0, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %3 = "arith.addf"(%1, %2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %c1 = "arith.constant"() <{value = 1 : i32}> : () -> i32
    %c2 = "arith.constant"() <{value = 2 : i32}> : () -> i32
    %s = "arith.addi"(%c1, %c2) : (i32, i32) -> i32
    %z = "arith.constant"() <{value = 0 : i32}> : () -> i32
    %t = "arith.addi"(%n, %z) : (i32, i32) -> i32
    %r = "arith.muli"(%t, %s) : (i32, i32) -> i32
    return %3, %r : tensor<4xf32>, i32
  }
}
