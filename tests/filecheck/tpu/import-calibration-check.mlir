// The calibration table and the qtable are checked against the model before anything is lowered:
// errors at the table's file:line (or naming the file), tensors/layers the model lacks as one warning.

// RUN: lamina-opt %s --pass-pipeline='builtin.module(import-calibration-table{file=%S/Inputs/table_unknown.txt})' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: table_unknown.txt:5:1: warning: 4 of the table's 6 tensors are not in the model: '/other/a', '/other/b', '/other/c' and 1 more (ignored
// UNKNOWN: !quant.calibrated<f32<0.000000e+00:3.000000e+00>>

// RUN: not lamina-opt %s --pass-pipeline='builtin.module(import-calibration-table{file=%S/Inputs/table_foreign.txt})' 2>&1 | FileCheck %s --check-prefix=FOREIGN
// FOREIGN: error: {{.*}}table_foreign.txt: the calibration table names none of the model's 2 tensors (it has '/other/a', '/other/b'; the model has 'x', 'relu'): an INT8 deployment would leave every op in F32

// RUN: not lamina-opt %s --pass-pipeline='builtin.module(import-calibration-table{file=%S/Inputs/table_empty.txt})' 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: error: {{.*}}table_empty.txt: the calibration table has no thresholds: an INT8 deployment would leave every op in F32

// RUN: not lamina-opt %s --pass-pipeline='builtin.module(import-calibration-table{file=%S/Inputs/table_axis.txt})' 2>&1 | FileCheck %s --check-prefix=AXIS
// AXIS: table_axis.txt:4:1: error: #channel_th axis 7 is out of range for 'relu' of type tensor<1x4xf32> (expected an axis in 0..1)

// RUN: not lamina-opt %s --pass-pipeline='builtin.module(import-calibration-table{file=%S/Inputs/table_count.txt})' 2>&1 | FileCheck %s --check-prefix=COUNT
// COUNT: table_count.txt:4:1: error: #channel_th 'relu' has 3 threshold(s) but the tensor has 4 channel(s) along axis 1 (type tensor<1x4xf32>)

// RUN: not lamina-opt %s --pass-pipeline='builtin.module(import-calibration-table{file=%S/Inputs/table_zero.txt})' 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: table_zero.txt:2:1: error: threshold of 'relu' must be a finite number > 0, got 0

// RUN: not lamina-opt %s --pass-pipeline='builtin.module(import-calibration-table{file=%S/Inputs/table_inf.txt})' 2>&1 | FileCheck %s --check-prefix=INF
// INF: table_inf.txt:2:1: error: threshold of 'relu' must be a finite number > 0, got inf

// RUN: lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=F32 qtable=%S/Inputs/qtable_unknown.txt})' 2>&1 | FileCheck %s --check-prefix=QUNKNOWN
// QUNKNOWN: qtable_unknown.txt:3:1: warning: 2 of the qtable's 3 layers are not in the model: '/gone/a', '/gone/b' (ignored
// QUNKNOWN: tpu.Relu

// RUN: not lamina-opt %s --pass-pipeline='builtin.module(convert-top-to-tpu{mode=F32 qtable=%S/Inputs/qtable_mode.txt})' 2>&1 | FileCheck %s --check-prefix=QMODE
// QMODE: qtable_mode.txt:2:1: error: unknown quantize mode 'FP64' (expected one of INT8, UINT8, INT4, F16, BF16, F32, F8E4M3, F8E5M2)

func.func @main(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %in = "top.Input"(%x) : (tensor<1x4xf32>) -> tensor<1x4xf32> loc("x")
  %r = "top.Relu"(%in) : (tensor<1x4xf32>) -> tensor<1x4xf32> loc("relu")
  return %r : tensor<1x4xf32>
}
