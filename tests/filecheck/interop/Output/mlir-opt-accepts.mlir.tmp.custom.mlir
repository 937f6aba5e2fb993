module {
  func.func @main(%arg0: tensor<2x3xf32>, %arg1: i1, %arg2: index) -> (tensor<2x3xf32>, i32) {
    %0 = "arith.constant"() <{value = dense<[[1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.500000e+00]]> : tensor<2x3xf32>}> : () -> tensor<2x3xf32>
    %1 = "arith.addf"(%arg0, %0) <{fastmath = #arith.fastmath<none>}> : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %2 = "arith.index_cast"(%arg2) : (index) -> i32
    %3 = "arith.constant"() <{value = 7 : i32}> : () -> i32
    %4 = "arith.cmpi"(%2, %3) <{predicate = 2 : i64}> : (i32, i32) -> i1
    %5 = "arith.select"(%4, %2, %3) : (i1, i32, i32) -> i32
    %6 = "lam_ext.custom"(%1) <{axes = array<i64: 0, 1>, mode = "nearest"}> {lam_ext.hint = 2.500000e-01 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    "cf.cond_br"(%arg1, %5)[^bb1, ^bb2] <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (i1, i32) -> ()
  ^bb1(%7: i32):  // pred: ^bb0
    return %6, %7 : tensor<2x3xf32>, i32
  ^bb2:  // pred: ^bb0
    return %1, %3 : tensor<2x3xf32>, i32
  }
}

