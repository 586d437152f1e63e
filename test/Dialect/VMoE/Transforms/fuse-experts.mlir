// RUN: vmoe-opt %s -split-input-file -vmoe-fuse-experts | FileCheck %s

// The MoE chain becomes assign_slots + fused_experts; the buffers and the
// expert outputs disappear, and other users of the slots read the new ones.
// CHECK-LABEL: func.func @fuse_bpr_runtime_capacity
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<1x16x8xf32>, %[[IDS:[a-z0-9]+]]: tensor<1x16x2xi32>, %[[O:[a-z0-9]+]]: tensor<1x16xi32>, %[[W:[a-z0-9]+]]: tensor<1x16x2xf32>,
// CHECK: %[[S:.*]], %[[E:.*]], %[[F:.*]] = vmoe.assign_slots %[[IDS]], %[[O]] capacity(%{{.*}}) : tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<1x16x2xi32>, tensor<4x1x8xi32>, tensor<4x1xi32>
// CHECK: %[[OUT:.*]] = vmoe.fused_experts %[[X]], %[[S]], %[[W]], %[[E]], %[[F]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {activation = #vmoe.activation<relu>}
// CHECK-NOT: vmoe.dispatch
// CHECK-NOT: vmoe.expert_ffn
// CHECK-NOT: vmoe.combine
// CHECK: return %[[OUT]], %[[S]]
func.func @fuse_bpr_runtime_capacity(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x2xi32>, %o: tensor<1x16xi32>,
    %w: tensor<1x16x2xf32>, %cap: index, %w1: tensor<4x8x16xf32>, %b1: tensor<4x16xf32>,
    %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) -> (tensor<1x16x8xf32>, tensor<1x16x2xi32>) {
  %buf, %slots = vmoe.dispatch %x, %ids, %o capacity(%cap) {capacity = 8 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<4x1x8x8xf32>, tensor<1x16x2xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<relu>}
      : tensor<4x1x8x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x8x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xi32>, tensor<1x16x2xf32> -> tensor<1x16x8xf32>
  return %out, %slots : tensor<1x16x8xf32>, tensor<1x16x2xi32>
}

// -----

// Vanilla routing (no order), default activation.
// CHECK-LABEL: func.func @fuse_vanilla
// CHECK: vmoe.assign_slots %{{.*}} : tensor<2x16x1xi32> -> tensor<2x16x1xi32>, tensor<4x2x4xi32>, tensor<4x2xi32>
// CHECK: vmoe.fused_experts
// CHECK-NOT: activation
func.func @fuse_vanilla(%x: tensor<2x16x8xf32>, %ids: tensor<2x16x1xi32>, %w: tensor<2x16x1xf32>,
    %w1: tensor<4x8x16xf32>, %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>)
    -> tensor<2x16x8xf32> {
  %buf, %slots = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<2x16x8xf32>, tensor<2x16x1xi32> -> tensor<4x2x4x8xf32>, tensor<2x16x1xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<4x2x4x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x2x4x8xf32>, tensor<2x16x1xi32>, tensor<2x16x1xi32>, tensor<2x16x1xf32> -> tensor<2x16x8xf32>
  return %out : tensor<2x16x8xf32>
}

// -----

/// The buffers have another user: fusing would lose them.
// CHECK-LABEL: func.func @negative_buffers_escape
// CHECK: vmoe.dispatch
// CHECK: vmoe.expert_ffn
// CHECK: vmoe.combine
// CHECK-NOT: vmoe.fused_experts
func.func @negative_buffers_escape(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x1xi32>, %w: tensor<1x16x1xf32>,
    %w1: tensor<4x8x16xf32>, %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>)
    -> (tensor<1x16x8xf32>, tensor<4x1x4x8xf32>) {
  %buf, %slots = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x1xi32> -> tensor<4x1x4x8xf32>, tensor<1x16x1xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<4x1x4x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x4x8xf32>, tensor<1x16x1xi32>, tensor<1x16x1xi32>, tensor<1x16x1xf32> -> tensor<1x16x8xf32>
  return %out, %buf : tensor<1x16x8xf32>, tensor<4x1x4x8xf32>
}

// -----

/// The expert outputs have another user.
// CHECK-LABEL: func.func @negative_outputs_escape
// CHECK: vmoe.combine
// CHECK-NOT: vmoe.fused_experts
func.func @negative_outputs_escape(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x1xi32>, %w: tensor<1x16x1xf32>,
    %w1: tensor<4x8x16xf32>, %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>)
    -> (tensor<1x16x8xf32>, tensor<4x1x4x8xf32>) {
  %buf, %slots = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x1xi32> -> tensor<4x1x4x8xf32>, tensor<1x16x1xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<4x1x4x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x4x8xf32>, tensor<1x16x1xi32>, tensor<1x16x1xi32>, tensor<1x16x1xf32> -> tensor<1x16x8xf32>
  return %out, %y : tensor<1x16x8xf32>, tensor<4x1x4x8xf32>
}

// -----

/// Unsized dispatch: the capacity is not static yet.
// CHECK-LABEL: func.func @negative_unsized
// CHECK: vmoe.dispatch
// CHECK-NOT: vmoe.fused_experts
func.func @negative_unsized(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x1xi32>, %w: tensor<1x16x1xf32>,
    %w1: tensor<4x8x16xf32>, %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>)
    -> tensor<1x16x8xf32> {
  %buf, %slots = vmoe.dispatch %x, %ids {capacity_ratio = 1.0 : f64}
      : tensor<1x16x8xf32>, tensor<1x16x1xi32> -> tensor<4x1x?x8xf32>, tensor<1x16x1xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<4x1x?x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x?x8xf32>, tensor<1x16x1xi32>, tensor<1x16x1xi32>, tensor<1x16x1xf32> -> tensor<1x16x8xf32>
  return %out : tensor<1x16x8xf32>
}

// -----

/// combine reads different ids than the dispatch used.
// CHECK-LABEL: func.func @negative_other_ids
// CHECK: vmoe.combine
// CHECK-NOT: vmoe.fused_experts
func.func @negative_other_ids(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x1xi32>, %ids2: tensor<1x16x1xi32>,
    %w: tensor<1x16x1xf32>, %w1: tensor<4x8x16xf32>, %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>,
    %b2: tensor<4x8xf32>) -> tensor<1x16x8xf32> {
  %buf, %slots = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x1xi32> -> tensor<4x1x4x8xf32>, tensor<1x16x1xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<4x1x4x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids2, %slots, %w
      : tensor<4x1x4x8xf32>, tensor<1x16x1xi32>, tensor<1x16x1xi32>, tensor<1x16x1xf32> -> tensor<1x16x8xf32>
  return %out : tensor<1x16x8xf32>
}

// -----

// The mask of padding tokens moves from the dispatch to the assign_slots.
// CHECK-LABEL: func.func @fuse_masked_padding
// CHECK-SAME: tensor<1x16x2xf32>, %[[N:[a-z0-9]+]]: index
// CHECK: vmoe.assign_slots %{{.*}}, %{{.*}} valid(%[[N]])
// CHECK: vmoe.fused_experts
func.func @fuse_masked_padding(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x2xi32>, %o: tensor<1x16xi32>,
    %w: tensor<1x16x2xf32>, %n: index, %w1: tensor<4x8x16xf32>, %b1: tensor<4x16xf32>,
    %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) -> tensor<1x16x8xf32> {
  %buf, %slots = vmoe.dispatch %x, %ids, %o valid(%n) {capacity = 8 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<4x1x8x8xf32>, tensor<1x16x2xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<4x1x8x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x8x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xi32>, tensor<1x16x2xf32> -> tensor<1x16x8xf32>
  return %out : tensor<1x16x8xf32>
}
