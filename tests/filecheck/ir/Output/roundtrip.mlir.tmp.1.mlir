#loc2 = loc("/work/main/tests/filecheck/ir/roundtrip.mlir":19:18)
#loc3 = loc("/work/main/tests/filecheck/ir/roundtrip.mlir":19:47)
#loc9 = loc("/work/main/tests/filecheck/ir/roundtrip.mlir":23:10)
"builtin.module"() ({
  "func.func"() <{function_type = (tensor<1x3x224x224xf32>, i1) -> tensor<1x64x112x112xf32>, sym_name = "net"}> ({
  ^bb0(%arg0: tensor<1x3x224x224xf32> loc("/work/main/tests/filecheck/ir/roundtrip.mlir":19:18), %arg1: i1 loc("/work/main/tests/filecheck/ir/roundtrip.mlir":19:47)):
    %0 = "lam_ext.conv"(%arg0) <{kernel = array<i64: 7, 7>, pads = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>}> {lam_ext.note = "stem"} : (tensor<1x3x224x224xf32>) -> tensor<1x64x112x112xf32> loc(#loc4)
    %1:2 = "lam_ext.split"(%0) {axis = 1 : i64} : (tensor<1x64x112x112xf32>) -> (tensor<1x32x112x112xf32>, tensor<1x32x112x112xf32>) loc(#loc13)
    %2 = "lam_ext.region_op"(%arg1) ({
    ^bb0(%arg2: tensor<1x64x112x112xf32> loc("/work/main/tests/filecheck/ir/roundtrip.mlir":23:10)):
      "lam_ext.yield"(%arg2) : (tensor<1x64x112x112xf32>) -> () loc(#loc10)
    }) : (i1) -> tensor<1x64x112x112xf32> loc(#loc14)
    %3 = "lam_ext.types"() {arr = [1, "two", 3.000000e+00], b = 2.500000e+00 : bf16, dict = {a = 2 : i32, b = 1 : i32}, dyn = tensor<?x3xf32>, f8 = 5.000000e-01 : f8E4M3FN, flag, g = 1.000000e+00 : f8E5M2, h = 1.500000e+00 : f16, i = 3 : i4, idx = 5 : index, s = -1 : si8, str = "quote\22 and \0A newline", sym = @net::@inner, t = tuple<i32, f32>, u = 7 : ui8, unr = tensor<*xf32>} : () -> none loc(#loc11)
    "func.return"(%0) : (tensor<1x64x112x112xf32>) -> () loc(#loc12)
  }) : () -> () loc(#loc1)
}) : () -> () loc(#loc)
#loc = loc("/work/main/tests/filecheck/ir/roundtrip.mlir":18:1)
#loc1 = loc("/work/main/tests/filecheck/ir/roundtrip.mlir":19:3)
#loc4 = loc("conv1")
#loc5 = loc("split")
#loc6 = loc("model.onnx":3:0)
#loc7 = loc("inner")
#loc8 = loc("outer")
#loc10 = loc("/work/main/tests/filecheck/ir/roundtrip.mlir":24:7)
#loc11 = loc("/work/main/tests/filecheck/ir/roundtrip.mlir":26:10)
#loc12 = loc("/work/main/tests/filecheck/ir/roundtrip.mlir":27:5)
#loc13 = loc(fused[#loc5, #loc6])
#loc14 = loc(callsite(#loc7 at #loc8))

