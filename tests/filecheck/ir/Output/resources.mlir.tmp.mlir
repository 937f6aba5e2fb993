module attributes {lamina.weight_file = "w.npz"} {
  func.func @f() -> tensor<2xf32> {
    %0 = "arith.constant"() <{value = dense_resource<weights> : tensor<2xf32>}> : () -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

