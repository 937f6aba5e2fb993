// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-npu,npu-partition,npu-layer-group{disable=true},npu-slice,npu-schedule,npu-lmem-alloc,npu-address-assign)' | FileCheck %s

// Copies that need not move (npu-address-assign): both halves of the Split are read by groups
// only, so each is a view of the conv's output (its address plus 4 channels of 64 bytes, the
// output's strides: npu.view, no GDMA move); both inputs of the Concat are stored by groups, which
// store them in place, at their channel offsets of the concatenation (npu.in_place: nothing left
// to move). Liveness lets the last group's output reuse the conv's buffer, dead by then.
// CHECK:      "npu.Group"(%arg0)
// CHECK:      }) {{{.*}}npu.ddr = array<i64: {{[0-9]+}}>
// CHECK:      %[[C1:.*]] = "npu.Group"
// CHECK:      }) {{{.*}}npu.ddr = array<i64: [[A:[0-9]+]]>
// CHECK-NEXT: %[[LO:.*]] = "npu.Copy"(%[[C1]]) {{.*}} {npu.ddr = array<i64: [[A]]>, npu.strides = {"0" = array<i64: 0, 64, 8, 1>}, {{.*}}npu.view = true}
// CHECK-NEXT: %[[HI:.*]] = "npu.Copy"(%[[C1]]) {{.*}} {npu.ddr = array<i64: {{[0-9]+}}>, npu.strides = {"0" = array<i64: 0, 64, 8, 1>}, {{.*}}npu.view = true}
// CHECK-NEXT: %[[C2:.*]] = "npu.Group"(%[[HI]],
// CHECK:      }) {{{.*}}npu.ddr = array<i64: [[B2:[0-9]+]]>, {{.*}}npu.strides = {"0" = array<i64: 0, 64, 8, 1>}
// CHECK-NEXT: %[[C3:.*]] = "npu.Group"(%[[LO]],
// CHECK:      }) {{{.*}}npu.ddr = array<i64: [[B3:[0-9]+]]>, {{.*}}npu.strides = {"0" = array<i64: 0, 64, 8, 1>}
// CHECK-NEXT: "npu.Copy"(%[[C3]], %[[C2]]) {{.*}} {npu.ddr = array<i64: [[B3]]>, npu.in_place = array<i64: 0, 1>{{.*}}}
// CHECK:      }) {{{.*}}npu.ddr = array<i64: [[A]]>
func.func @main(%x: tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x8x8x8x!quant.calibrated<f32<0.0:4.0>>> {
  %in = "top.Input"(%x) : (tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %none = "top.None"() : () -> none
  %w1 = "top.Weight"() <{value = dense<0.125> : tensor<8x4x3x3xf32>}> : () -> tensor<8x4x3x3xf32>
  %c1 = "top.Conv"(%in, %w1, %none) <{do_relu = true, pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>, tensor<8x4x3x3xf32>, none) -> tensor<1x8x8x8x!quant.calibrated<f32<0.0:4.0>>> loc("c1")
  %sz = "top.Weight"() <{value = dense<[4, 4]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %s:2 = "top.Split"(%c1, %sz) <{axis = 1 : i64}> : (tensor<1x8x8x8x!quant.calibrated<f32<0.0:4.0>>>, tensor<2xi64>) -> (tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>>, tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>>) loc(fused["a", "b"])
  %w2 = "top.Weight"() <{value = dense<0.0625> : tensor<4x4x3x3xf32>}> : () -> tensor<4x4x3x3xf32>
  %c2 = "top.Conv"(%s#1, %w2, %none) <{do_relu = true, pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>>, tensor<4x4x3x3xf32>, none) -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>> loc("c2")
  %w3 = "top.Weight"() <{value = dense<0.25> : tensor<4x4x1x1xf32>}> : () -> tensor<4x4x1x1xf32>
  %c3 = "top.Conv"(%s#0, %w3, %none) <{do_relu = true}> : (tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>>, tensor<4x4x1x1xf32>, none) -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>> loc("c3")
  %y = "top.Concat"(%c3, %c2) <{axis = 1 : i64}> : (tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>>, tensor<1x4x8x8x!quant.calibrated<f32<0.0:4.0>>>) -> tensor<1x8x8x8x!quant.calibrated<f32<0.0:4.0>>> loc("y")
  return %y : tensor<1x8x8x8x!quant.calibrated<f32<0.0:4.0>>>
}
