// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-npu,npu-partition)' | FileCheck %s

// The Gather (no NPU form) reads only the function's arguments: it moves to the front, so that the
// two Adds, which the original order splits around it, stay one NPU subnet (one command buffer,
// and a run the layer groups may join).
// CHECK: func.func @main({{.*}}) {{.*}} attributes {{{.*}}npu.subnets = ["cpu", "npu"]}
// CHECK-NEXT: %[[G:.*]] = "tpu.Gather"{{.*}} {npu.subnet = 0 : i64}
// CHECK-NEXT: "npu.Cast"{{.*}}{npu.subnet = 1 : i64}
// CHECK-NEXT: "npu.Eltwise"{{.*}}{npu.subnet = 1 : i64}
// CHECK-NEXT: "npu.Eltwise"{{.*}}{npu.subnet = 1 : i64}
// CHECK-NEXT: "npu.Cast"{{.*}}{npu.subnet = 1 : i64}
// CHECK-NEXT: return {{.*}}, %[[G]]
func.func @main(%x: tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>, %t: tensor<10x8xf32>, %i: tensor<3xi64>) -> (tensor<1x4x8x8x!quant.calibrated<f32<-3.0:3.0>>>, tensor<3x8xf32>) {
  %in = "top.Input"(%x) : (tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %a = "top.Add"(%in, %in) : (tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>, tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4x8x8x!quant.calibrated<f32<-3.0:3.0>>> loc("a")
  %g = "top.Gather"(%t, %i) <{axis = 0 : i64}> : (tensor<10x8xf32>, tensor<3xi64>) -> tensor<3x8xf32> loc("g")
  %b = "top.Add"(%a, %a) : (tensor<1x4x8x8x!quant.calibrated<f32<-3.0:3.0>>>, tensor<1x4x8x8x!quant.calibrated<f32<-3.0:3.0>>>) -> tensor<1x4x8x8x!quant.calibrated<f32<-3.0:3.0>>> loc("b")
  return %b, %g : tensor<1x4x8x8x!quant.calibrated<f32<-3.0:3.0>>>, tensor<3x8xf32>
}
