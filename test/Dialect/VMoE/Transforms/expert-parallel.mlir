// RUN: vmoe-opt %s -split-input-file -vmoe-expert-parallel="ranks=2" -verify-diagnostics | FileCheck %s

// The token choice chain: exchanges around the expert MLP, which runs on the
// rank's shard of every weight; routing (dispatch) and combine stay local.
// CHECK-LABEL: func.func @chain_two_ranks_masked
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<1x8x4xf32>, %[[IDS:[a-z0-9]+]]: tensor<1x8x2xi32>, %[[W:[a-z0-9]+]]: tensor<1x8x2xf32>, %[[W1:[a-z0-9]+]]: tensor<4x4x16xf32>, %[[B1:[a-z0-9]+]]: tensor<4x16xf32>, %[[W2:[a-z0-9]+]]: tensor<4x16x4xf32>, %[[B2:[a-z0-9]+]]: tensor<4x4xf32>, %[[N:[a-z0-9]+]]: index)
// CHECK: %[[BUF:.*]], %[[SLOTS:.*]] = vmoe.dispatch %[[X]], %[[IDS]] valid(%[[N]])
// CHECK: %[[ROWS:.*]] = vmoe.exchange_dispatch %[[BUF]], %[[IDS]], %[[SLOTS]] {layer = 0 : i64, ranks = 2 : i64} : tensor<4x1x3x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32> -> tensor<2x2x3x4xf32>
// CHECK: %[[S1:.*]] = vmoe.expert_shard %[[W1]] {ranks = 2 : i64} : tensor<4x4x16xf32> -> tensor<2x4x16xf32>
// CHECK: %[[S2:.*]] = vmoe.expert_shard %[[B1]] {ranks = 2 : i64} : tensor<4x16xf32> -> tensor<2x16xf32>
// CHECK: %[[S3:.*]] = vmoe.expert_shard %[[W2]] {ranks = 2 : i64} : tensor<4x16x4xf32> -> tensor<2x16x4xf32>
// CHECK: %[[S4:.*]] = vmoe.expert_shard %[[B2]] {ranks = 2 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK: %[[Y:.*]] = vmoe.expert_ffn %[[ROWS]], %[[S1]], %[[S2]], %[[S3]], %[[S4]] {activation = #vmoe.activation<relu>} : tensor<2x2x3x4xf32>
// CHECK: %[[BACK:.*]] = vmoe.exchange_combine %[[Y]], %[[IDS]], %[[SLOTS]] {layer = 0 : i64, ranks = 2 : i64} : tensor<2x2x3x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32> -> tensor<4x1x3x4xf32>
// CHECK: vmoe.combine %[[BACK]], %[[IDS]], %[[SLOTS]], %[[W]]
func.func @chain_two_ranks_masked(%x: tensor<1x8x4xf32>, %ids: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %w1: tensor<4x4x16xf32>, %b1: tensor<4x16xf32>, %w2: tensor<4x16x4xf32>, %b2: tensor<4x4xf32>,
    %n: index) -> tensor<1x8x4xf32> {
  %buf, %slots = vmoe.dispatch %x, %ids valid(%n) {capacity = 3 : i64}
      : tensor<1x8x4xf32>, tensor<1x8x2xi32> -> tensor<4x1x3x4xf32>, tensor<1x8x2xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<relu>}
      : tensor<4x1x3x4xf32>, tensor<4x4x16xf32>, tensor<4x16xf32>, tensor<4x16x4xf32>, tensor<4x4xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x3x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32>, tensor<1x8x2xf32> -> tensor<1x8x4xf32>
  return %out : tensor<1x8x4xf32>
}

// -----

// Two layers are numbered in order.
// CHECK-LABEL: func.func @two_layers
// CHECK: vmoe.exchange_dispatch {{.*}}layer = 0
// CHECK: vmoe.exchange_combine {{.*}}layer = 0
// CHECK: vmoe.exchange_dispatch {{.*}}layer = 1
// CHECK: vmoe.exchange_combine {{.*}}layer = 1
func.func @two_layers(%x: tensor<1x8x4xf32>, %ids: tensor<1x8x1xi32>, %w: tensor<1x8x1xf32>,
    %w1: tensor<2x4x8xf32>, %b1: tensor<2x8xf32>, %w2: tensor<2x8x4xf32>, %b2: tensor<2x4xf32>) -> tensor<1x8x4xf32> {
  %buf, %slots = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x8x4xf32>, tensor<1x8x1xi32> -> tensor<2x1x4x4xf32>, tensor<1x8x1xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<2x1x4x4xf32>, tensor<2x4x8xf32>, tensor<2x8xf32>, tensor<2x8x4xf32>, tensor<2x4xf32>
  %o = vmoe.combine %y, %ids, %slots, %w
      : tensor<2x1x4x4xf32>, tensor<1x8x1xi32>, tensor<1x8x1xi32>, tensor<1x8x1xf32> -> tensor<1x8x4xf32>
  %buf2, %slots2 = vmoe.dispatch %o, %ids {capacity = 4 : i64}
      : tensor<1x8x4xf32>, tensor<1x8x1xi32> -> tensor<2x1x4x4xf32>, tensor<1x8x1xi32>
  %y2 = vmoe.expert_ffn %buf2, %w1, %b1, %w2, %b2
      : tensor<2x1x4x4xf32>, tensor<2x4x8xf32>, tensor<2x8xf32>, tensor<2x8x4xf32>, tensor<2x4xf32>
  %o2 = vmoe.combine %y2, %ids, %slots2, %w
      : tensor<2x1x4x4xf32>, tensor<1x8x1xi32>, tensor<1x8x1xi32>, tensor<1x8x1xf32> -> tensor<1x8x4xf32>
  return %o2 : tensor<1x8x4xf32>
}

// -----

/// A function without MoE layers is left alone.
// CHECK-LABEL: func.func @negative_no_moe
// CHECK-NOT: vmoe.exchange
func.func @negative_no_moe(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

/// E not divisible by the ranks: one error.
func.func @negative_experts_not_divisible(%x: tensor<1x8x4xf32>, %ids: tensor<1x8x1xi32>, %w: tensor<1x8x1xf32>,
    %w1: tensor<3x4x8xf32>, %b1: tensor<3x8xf32>, %w2: tensor<3x8x4xf32>, %b2: tensor<3x4xf32>) -> tensor<1x8x4xf32> {
  // expected-error @+1 {{expert parallelism: 3 experts are not divisible by 2 ranks}}
  %buf, %slots = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x8x4xf32>, tensor<1x8x1xi32> -> tensor<3x1x4x4xf32>, tensor<1x8x1xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<3x1x4x4xf32>, tensor<3x4x8xf32>, tensor<3x8xf32>, tensor<3x8x4xf32>, tensor<3x4xf32>
  %o = vmoe.combine %y, %ids, %slots, %w
      : tensor<3x1x4x4xf32>, tensor<1x8x1xi32>, tensor<1x8x1xi32>, tensor<1x8x1xf32> -> tensor<1x8x4xf32>
  return %o : tensor<1x8x4xf32>
}

// -----

/// An expert_ffn outside a dispatch -> combine chain (the front end's dense
/// MLP) stays local.
// CHECK-LABEL: func.func @negative_ffn_alone
// CHECK-NOT: vmoe.exchange
// CHECK-NOT: vmoe.expert_shard
func.func @negative_ffn_alone(%buf: tensor<2x1x4x4xf32>, %w1: tensor<2x4x8xf32>, %b1: tensor<2x8xf32>,
    %w2: tensor<2x8x4xf32>, %b2: tensor<2x4xf32>) -> tensor<2x1x4x4xf32> {
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<2x1x4x4xf32>, tensor<2x4x8xf32>, tensor<2x8xf32>, tensor<2x8x4xf32>, tensor<2x4xf32>
  return %y : tensor<2x1x4x4xf32>
}

// -----

/// Soft MoE keeps its experts in one op: not supported under expert
/// parallelism.
func.func @negative_soft_moe(%x: tensor<1x8x4xf32>, %phi: tensor<4x2x1xf32>, %scale: tensor<f32>,
    %w1: tensor<2x4x8xf32>, %b1: tensor<2x8xf32>, %w2: tensor<2x8x4xf32>, %b2: tensor<2x4xf32>) -> tensor<1x8x4xf32> {
  // expected-error @+1 {{is not supported under expert parallelism}}
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<1x8x4xf32>, tensor<4x2x1xf32>, tensor<f32>, tensor<2x4x8xf32>, tensor<2x8xf32>,
        tensor<2x8x4xf32>, tensor<2x4xf32>
  return %o : tensor<1x8x4xf32>
}
