// RUN: lamina-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(top-shape-infer))' --mlir-print-op-generic | FileCheck %s
// RUN: not lamina-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(top-shape-infer{input-shapes=2x3x4,1}))' 2>&1 | FileCheck %s --check-prefix=TOP

// A branch that does not fit the input shapes (onnxruntime runs such models: the branch is not
// taken) keeps run-time shapes instead of failing the model; the other branch is still refined.
// CHECK-LABEL: sym_name = "untaken_branch"
// CHECK: "top.If"
// CHECK: "top.Relu"{{.*}} -> tensor<2x3x4xf32>
// CHECK: "top.Squeeze"{{.*}} -> tensor<*xf32>
// CHECK: "top.Neg"{{.*}} -> tensor<*xf32>
func.func @untaken_branch(%x: tensor<2x3x4xf32>, %c: tensor<1xi1>) -> tensor<*xf32> {
  %in = "top.Input"(%x) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %cond = "top.Input"(%c) : (tensor<1xi1>) -> tensor<1xi1>
  %ax = "top.Weight"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %r = "top.If"(%cond) ({
    %t = "top.Relu"(%in) : (tensor<2x3x4xf32>) -> tensor<*xf32>
    "top.Yield"(%t) : (tensor<*xf32>) -> ()
  }, {
    %s = "top.Squeeze"(%in, %ax) : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<2x4xf32>
    %n = "top.Neg"(%s) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    "top.Yield"(%n) : (tensor<2x4xf32>) -> ()
  }) : (tensor<1xi1>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// Outside regions the same failure is an error naming the tensor.
// TOP: error: 'top.Squeeze' op shape inference failed for tensor 'sq': cannot select an axis to squeeze out
func.func @top_level(%x: tensor<2x1x4xf32>, %c: tensor<1xi1>) -> tensor<*xf32> {
  %in = "top.Input"(%x) : (tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %ax = "top.Weight"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %s = "top.Squeeze"(%in, %ax) : (tensor<2x1x4xf32>, tensor<1xi64>) -> tensor<*xf32> loc("sq")
  return %s : tensor<*xf32>
}
