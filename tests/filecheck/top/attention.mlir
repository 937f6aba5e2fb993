// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-op-generic | FileCheck %s
// RUN: lamina-opt %s --pass-pipeline='builtin.module(func.func(top-canonicalize))' --mlir-print-op-generic | FileCheck %s

// Softmax(Q K^T / sqrt(d) + mask) V with 4-d (batch, heads, seq, dim) inputs.
// CHECK-LABEL: sym_name = "sdpa_mask"
// CHECK: ^bb0(%[[QA:.*]]: tensor<1x2x5x8xf32>, %[[KA:.*]]: tensor<1x2x6x8xf32>, %[[VA:.*]]: tensor<1x2x6x8xf32>, %[[MA:.*]]: tensor<1x1x5x6xf32>):
// CHECK-DAG: %[[Q:.*]] = "top.Input"(%[[QA]])
// CHECK-DAG: %[[K:.*]] = "top.Input"(%[[KA]])
// CHECK-DAG: %[[V:.*]] = "top.Input"(%[[VA]])
// CHECK-DAG: %[[M:.*]] = "top.Input"(%[[MA]])
// CHECK: %[[A:.*]]:4 = "top.Attention"(%[[Q]], %[[K]], %[[V]], %[[M]], %{{.*}}, %{{.*}}, %{{.*}}) <{scale = 0.35355{{[0-9]*}} : f64}>
// CHECK-SAME: -> (tensor<1x2x5x8xf32>, none, none, none)
// CHECK-NOT: "top.Softmax"
// CHECK: "func.return"(%[[A]]#0)
func.func @sdpa_mask(%qa: tensor<1x2x5x8xf32>, %ka: tensor<1x2x6x8xf32>, %va: tensor<1x2x6x8xf32>, %ma: tensor<1x1x5x6xf32>) -> tensor<1x2x5x8xf32> {
  %q = "top.Input"(%qa) : (tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32>
  %k = "top.Input"(%ka) : (tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
  %v = "top.Input"(%va) : (tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
  %m = "top.Input"(%ma) : (tensor<1x1x5x6xf32>) -> tensor<1x1x5x6xf32>
  %n = "top.None"() : () -> none
  %kt = "top.Permute"(%k) <{order = array<i64: 0, 1, 3, 2>}> : (tensor<1x2x6x8xf32>) -> tensor<1x2x8x6xf32>
  %qk = "top.MatMul"(%q, %kt, %n) : (tensor<1x2x5x8xf32>, tensor<1x2x8x6xf32>, none) -> tensor<1x2x5x6xf32>
  %c = "top.Weight"() <{value = dense<2.82842708> : tensor<f32>}> : () -> tensor<f32>
  %s = "top.Div"(%qk, %c) : (tensor<1x2x5x6xf32>, tensor<f32>) -> tensor<1x2x5x6xf32>
  %sm = "top.Add"(%s, %m) : (tensor<1x2x5x6xf32>, tensor<1x1x5x6xf32>) -> tensor<1x2x5x6xf32>
  %p = "top.Softmax"(%sm) <{axis = -1 : i64}> : (tensor<1x2x5x6xf32>) -> tensor<1x2x5x6xf32>
  %o = "top.MatMul"(%p, %v, %n) : (tensor<1x2x5x6xf32>, tensor<1x2x6x8xf32>, none) -> tensor<1x2x5x8xf32>
  return %o : tensor<1x2x5x8xf32>
}

// 3-d inputs (one head), scale by multiplication, K^T given directly (a Permute is inserted).
// CHECK-LABEL: sym_name = "sdpa_3d"
// CHECK: ^bb0(%{{.*}}: tensor<2x5x8xf32>, %[[KTA:.*]]: tensor<2x8x6xf32>, %{{.*}}: tensor<2x6x4xf32>):
// CHECK: %[[KT:.*]] = "top.Input"(%[[KTA]])
// CHECK: %[[K:.*]] = "top.Permute"(%[[KT]]) <{order = array<i64: 0, 2, 1>}> : (tensor<2x8x6xf32>) -> tensor<2x6x8xf32>
// CHECK: "top.Attention"(%{{.*}}, %[[K]], {{.*}}) <{kv_num_heads = 1 : i64, q_num_heads = 1 : i64, scale = 1.250000e-01 : f64}>
// CHECK-NOT: "top.Softmax"
func.func @sdpa_3d(%qa: tensor<2x5x8xf32>, %kta: tensor<2x8x6xf32>, %va: tensor<2x6x4xf32>) -> tensor<2x5x4xf32> {
  %q = "top.Input"(%qa) : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %kt = "top.Input"(%kta) : (tensor<2x8x6xf32>) -> tensor<2x8x6xf32>
  %v = "top.Input"(%va) : (tensor<2x6x4xf32>) -> tensor<2x6x4xf32>
  %n = "top.None"() : () -> none
  %qk = "top.MatMul"(%q, %kt, %n) : (tensor<2x5x8xf32>, tensor<2x8x6xf32>, none) -> tensor<2x5x6xf32>
  %c = "top.Weight"() <{value = dense<0.125> : tensor<f32>}> : () -> tensor<f32>
  %s = "top.Mul"(%qk, %c) : (tensor<2x5x6xf32>, tensor<f32>) -> tensor<2x5x6xf32>
  %p = "top.Softmax"(%s) <{axis = 2 : i64}> : (tensor<2x5x6xf32>) -> tensor<2x5x6xf32>
  %o = "top.MatMul"(%p, %v, %n) : (tensor<2x5x6xf32>, tensor<2x6x4xf32>, none) -> tensor<2x5x4xf32>
  return %o : tensor<2x5x4xf32>
}

// Not attention: the softmax is over another axis.
// CHECK-LABEL: sym_name = "not_sdpa"
// CHECK-NOT: "top.Attention"
// CHECK: "top.Softmax"
func.func @not_sdpa(%qa: tensor<2x5x8xf32>, %kta: tensor<2x8x6xf32>, %va: tensor<2x6x4xf32>) -> tensor<2x5x4xf32> {
  %q = "top.Input"(%qa) : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %kt = "top.Input"(%kta) : (tensor<2x8x6xf32>) -> tensor<2x8x6xf32>
  %v = "top.Input"(%va) : (tensor<2x6x4xf32>) -> tensor<2x6x4xf32>
  %n = "top.None"() : () -> none
  %qk = "top.MatMul"(%q, %kt, %n) : (tensor<2x5x8xf32>, tensor<2x8x6xf32>, none) -> tensor<2x5x6xf32>
  %p = "top.Softmax"(%qk) <{axis = 1 : i64}> : (tensor<2x5x6xf32>) -> tensor<2x5x6xf32>
  %o = "top.MatMul"(%p, %v, %n) : (tensor<2x5x6xf32>, tensor<2x6x4xf32>, none) -> tensor<2x5x4xf32>
  return %o : tensor<2x5x4xf32>
}

// BERT's boolean mask, Where(mask, scores, min): the additive mask Where(mask, 0, min) feeds Attention.
// CHECK-LABEL: sym_name = "sdpa_where_mask"
// CHECK-DAG: %[[C:.*]] = "top.Input"(%{{.*}}) : (tensor<2x1x1x6xi1>)
// CHECK-DAG: %[[Z:.*]] = "top.Weight"() <{value = dense_resource<{{.*}}> : tensor<f32>}>
// CHECK: %[[M:.*]] = "top.Where"(%[[C]], %[[Z]], %{{.*}}) : (tensor<2x1x1x6xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x1x6xf32>
// CHECK: "top.Attention"(%{{.*}}, %{{.*}}, %{{.*}}, %[[M]], {{.*}}) <{scale = 2.500000e-01 : f64}>
// CHECK-NOT: "top.Softmax"
func.func @sdpa_where_mask(%qa: tensor<2x4x6x16xf32>, %ka: tensor<2x4x6x16xf32>, %va: tensor<2x4x6x16xf32>, %ca: tensor<2x1x1x6xi1>) -> tensor<2x4x6x16xf32> {
  %q = "top.Input"(%qa) : (tensor<2x4x6x16xf32>) -> tensor<2x4x6x16xf32>
  %k = "top.Input"(%ka) : (tensor<2x4x6x16xf32>) -> tensor<2x4x6x16xf32>
  %v = "top.Input"(%va) : (tensor<2x4x6x16xf32>) -> tensor<2x4x6x16xf32>
  %c = "top.Input"(%ca) : (tensor<2x1x1x6xi1>) -> tensor<2x1x1x6xi1>
  %n = "top.None"() : () -> none
  %kt = "top.Permute"(%k) <{order = array<i64: 0, 1, 3, 2>}> : (tensor<2x4x6x16xf32>) -> tensor<2x4x16x6xf32>
  %qk = "top.MatMul"(%q, %kt, %n) : (tensor<2x4x6x16xf32>, tensor<2x4x16x6xf32>, none) -> tensor<2x4x6x6xf32>
  %sc = "top.Weight"() <{value = dense<4.0> : tensor<f32>}> : () -> tensor<f32>
  %s = "top.Div"(%qk, %sc) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %fill = "top.Weight"() <{value = dense<-3.40282347E+38> : tensor<f32>}> : () -> tensor<f32>
  %w = "top.Where"(%c, %s, %fill) : (tensor<2x1x1x6xi1>, tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %p = "top.Softmax"(%w) <{axis = -1 : i64}> : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %o = "top.MatMul"(%p, %v, %n) : (tensor<2x4x6x6xf32>, tensor<2x4x6x16xf32>, none) -> tensor<2x4x6x16xf32>
  return %o : tensor<2x4x6x16xf32>
}
