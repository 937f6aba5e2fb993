// The NPU's layer-group passes on a small CNN (conv, max pool, conv), on a tiny chip whose 1 KiB of
// LMEM per lane forces slicing. Each pass writes its decisions as attributes.
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-npu{chip=%S/Inputs/tiny.json},npu-layer-group{chip=%S/Inputs/tiny.json})' | FileCheck %s --check-prefix=LG
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-npu{chip=%S/Inputs/tiny.json},npu-layer-group{chip=%S/Inputs/tiny.json disable=true})' | FileCheck %s --check-prefix=NOLG
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-npu{chip=%S/Inputs/tiny.json},npu-layer-group{chip=%S/Inputs/tiny.json},npu-slice{chip=%S/Inputs/tiny.json})' | FileCheck %s --check-prefix=SLICE
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-npu{chip=%S/Inputs/tiny.json},npu-layer-group{chip=%S/Inputs/tiny.json},npu-slice{chip=%S/Inputs/tiny.json},npu-schedule{chip=%S/Inputs/tiny.json})' | FileCheck %s --check-prefix=SCHED
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-npu{chip=%S/Inputs/tiny.json},npu-layer-group{chip=%S/Inputs/tiny.json},npu-slice{chip=%S/Inputs/tiny.json},npu-schedule{chip=%S/Inputs/tiny.json},npu-lmem-alloc{chip=%S/Inputs/tiny.json},npu-address-assign)' | FileCheck %s --check-prefix=ALLOC
// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=INT8},convert-tpu-to-npu{chip=%S/Inputs/tiny.json},npu-layer-group{chip=lnpu})' | FileCheck %s --check-prefix=BIG

// The interval DP keeps the first conv with the pool (the pool's input never goes to DDR), sliced in
// two along h; the input cast alone (its f32 input is four times the conv's); the last conv whole.
// LG:      "npu.Group"(%{{.*}}) <{secs = array<i64: 1, 1, 3, 1>}> ({
// LG:        "npu.Load"
// LG-NEXT:   "npu.Cast"
// LG-NEXT:   "npu.Store"
// LG:      "npu.Group"(%{{.*}}) <{secs = array<i64: 1, 1, 2, 1>}> ({
// LG-COUNT-3: "npu.Load"
// LG-NEXT:   "npu.Conv"
// LG-NEXT:   "npu.Pool"
// LG-NEXT:   "npu.Store"
// LG:      }) {npu.cycles = {{[0-9]+}} : i64}
// LG:      "npu.Group"(%{{.*}}) <{secs = array<i64: 1, 1, 1, 1>}> ({
// LG:        "npu.Conv"
// LG-NEXT:   "npu.Cast"
// LG-NEXT:   "npu.Store"
// LG-NOT:  "npu.Group"
// With layer groups disabled, each command is a group of its own.
// NOLG-COUNT-5: "npu.Group"
// NOLG-NOT: "npu.Group"
// The chip of 256 KiB per lane takes the whole net in one group, unsliced.
// BIG-COUNT-1: "npu.Group"(%{{.*}}) <{secs = array<i64: 1, 1, 1, 1>}>
// BIG-NOT: "npu.Group"

// Backward slice propagation: the pool's two halves of 4 rows need the conv's rows 0-8 and 8-16,
// which (3x3, pad 1) read the input's rows 0-9 and 7-16 (halos); the weights are the same each slice.
// SLICE:     "npu.Load"(%arg{{[0-9]+}}) {npu.slices = {c = array<i64: 0, 4>, h = array<i64: 0, 9, 7, 16>, n = array<i64: 0, 1>, w = array<i64: 0, 16>}}
// SLICE:     "npu.Load"(%arg{{[0-9]+}}) {npu.slices = {c = array<i64: 0, 8>, h = array<i64: 0, 4, 0, 4>, n = array<i64: 0, 1>, w = array<i64: 0, 9>}} : (tensor<1x8x4x9xi8>)
// SLICE:     "npu.Conv"{{.*}}npu.slices = {c = array<i64: 0, 8>, h = array<i64: 0, 8, 8, 16>, n = array<i64: 0, 1>, w = array<i64: 0, 16>}
// SLICE:     "npu.Pool"{{.*}}npu.slices = {c = array<i64: 0, 8>, h = array<i64: 0, 4, 4, 8>, n = array<i64: 0, 1>, w = array<i64: 0, 8>}

// The 3-stage pipeline: the input is loaded per slice into two buffers, the weights once in the
// prologue; the conv's output is an intermediate (one buffer), the pool's is stored (two).
// SCHED:     "npu.Load"(%arg{{[0-9]+}}) {npu.buffers = 2 : i64, npu.once = false{{.*}}npu.stage = 0 : i64} : (tensor<1x4x16x16x
// SCHED:     "npu.Load"(%arg{{[0-9]+}}) {npu.buffers = 1 : i64, npu.once = true{{.*}}npu.stage = 0 : i64} : (tensor<1x8x4x9xi8>)
// SCHED:     "npu.Conv"{{.*}}{npu.buffers = 1 : i64{{.*}}npu.stage = 1 : i64}
// SCHED:     "npu.Pool"{{.*}}{npu.buffers = 2 : i64{{.*}}npu.stage = 1 : i64}
// SCHED:     "npu.Store"{{.*}} {npu.stage = 2 : i64}
// SCHED:   }) {npu.cycles = {{[0-9]+}} : i64, npu.timesteps = 4 : i64}

// LMEM: every buffer placed within the 1024 bytes of a lane (address, bytes per buffer, buffers);
// DDR: weights from 0, 64-byte aligned; activations from 4 KiB, reusing memory by liveness (the
// function's input and the last group's output share 4096: the input is dead by then).
// ALLOC: module attributes {npu.activation_base = 4096 : i64, npu.activation_bytes = {{[0-9]+}} : i64, npu.weight_bytes = 1024 : i64}
// ALLOC: func.func @main(%arg0: tensor<1x4x16x16xf32>) -> tensor<1x8x8x8xf32> attributes {npu.arg_ddr = array<i64: 4096>}
// ALLOC: "npu.Weight"() <{value = dense_resource<conv1_weight> : tensor<1x8x4x9xi8>}> {npu.ddr = array<i64: 0>}
// ALLOC: "npu.Weight"() <{value = dense_resource<conv1_quant> : tensor<1x8x1x2xi32>}> {npu.ddr = array<i64: 320>}
// ALLOC: "npu.Load"{{.*}}npu.lmem = array<i64: {{[0-9]+}}, 384, 2>
// ALLOC: "npu.Cast"{{.*}}npu.lmem = array<i64: {{[0-9]+}}, 96, 2>
// ALLOC: }) {npu.cycles = {{[0-9]+}} : i64, npu.ddr = array<i64: {{[0-9]+}}>, npu.lmem_bytes = {{(9[0-9][0-9]|10[01][0-9]|102[0-4])}} : i64
// ALLOC: "npu.Group"
// ALLOC: }) {npu.cycles = {{[0-9]+}} : i64, npu.ddr = array<i64: {{[0-9]+}}>, npu.lmem_bytes = {{[0-9]+}} : i64
// ALLOC: "npu.Group"
// ALLOC: }) {npu.cycles = {{[0-9]+}} : i64, npu.ddr = array<i64: 4096>, npu.lmem_bytes = {{[0-9]+}} : i64
func.func @main(%x: tensor<1x4x16x16x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x8x8x8x!quant.calibrated<f32<0.0:4.0>>> {
  %in = "top.Input"(%x) : (tensor<1x4x16x16x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4x16x16x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %none = "top.None"() : () -> none
  %w1 = "top.Weight"() <{value = dense<0.125> : tensor<8x4x3x3xf32>}> : () -> tensor<8x4x3x3xf32>
  %c1 = "top.Conv"(%in, %w1, %none) <{do_relu = true, pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x4x16x16x!quant.calibrated<f32<-2.0:2.0>>>, tensor<8x4x3x3xf32>, none) -> tensor<1x8x16x16x!quant.calibrated<f32<0.0:4.0>>> loc("conv1")
  %p:2 = "top.MaxPool"(%c1) <{kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>}> : (tensor<1x8x16x16x!quant.calibrated<f32<0.0:4.0>>>) -> (tensor<1x8x8x8x!quant.calibrated<f32<0.0:4.0>>>, none) loc("pool")
  %w2 = "top.Weight"() <{value = dense<0.0625> : tensor<8x8x3x3xf32>}> : () -> tensor<8x8x3x3xf32>
  %c2 = "top.Conv"(%p#0, %w2, %none) <{do_relu = true, pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x8x8x8x!quant.calibrated<f32<0.0:4.0>>>, tensor<8x8x3x3xf32>, none) -> tensor<1x8x8x8x!quant.calibrated<f32<0.0:4.0>>> loc("conv2")
  return %c2 : tensor<1x8x8x8x!quant.calibrated<f32<0.0:4.0>>>
}
