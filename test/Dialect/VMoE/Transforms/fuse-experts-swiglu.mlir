// RUN: vmoe-opt %s -split-input-file -vmoe-fuse-experts | FileCheck %s

// dispatch -> expert_swiglu -> combine becomes assign_slots + a gated
// fused_experts: w1 = w_gate, w2 = w_down, w_up, silu, zero biases.
// CHECK-LABEL: func.func @fuse_swiglu_dropless
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<1x16x8xf32>, %[[IDS:[a-z0-9]+]]: tensor<1x16x2xi32>, %[[W:[a-z0-9]+]]: tensor<1x16x2xf32>, %[[WG:[a-z0-9]+]]: tensor<4x8x12xf32>, %[[WU:[a-z0-9]+]]: tensor<4x8x12xf32>, %[[WD:[a-z0-9]+]]: tensor<4x12x8xf32>)
// CHECK-DAG: %[[B1:.*]] = arith.constant dense<0.000000e+00> : tensor<4x12xf32>
// CHECK-DAG: %[[B2:.*]] = arith.constant dense<0.000000e+00> : tensor<4x8xf32>
// CHECK: %[[S:.*]], %[[E:.*]], %[[F:.*]] = vmoe.assign_slots %[[IDS]] : tensor<1x16x2xi32> -> tensor<1x16x2xi32>, tensor<4x1x16xi32>, tensor<4x1xi32>
// CHECK: %[[OUT:.*]] = vmoe.fused_experts %[[X]], %[[S]], %[[W]], %[[E]], %[[F]], %[[WG]], %[[B1]], %[[WD]], %[[B2]] gated(%[[WU]] : tensor<4x8x12xf32>) {activation = #vmoe.activation<silu>}
// CHECK-NOT: vmoe.dispatch
// CHECK-NOT: vmoe.expert_swiglu
// CHECK-NOT: vmoe.combine
// CHECK: return %[[OUT]]
func.func @fuse_swiglu_dropless(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x2xi32>, %w: tensor<1x16x2xf32>,
    %wg: tensor<4x8x12xf32>, %wu: tensor<4x8x12xf32>, %wd: tensor<4x12x8xf32>) -> tensor<1x16x8xf32> {
  %buf, %slots = vmoe.dispatch %x, %ids {capacity = 16 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32> -> tensor<4x1x16x8xf32>, tensor<1x16x2xi32>
  %y = vmoe.expert_swiglu %buf, %wg, %wu, %wd
      : tensor<4x1x16x8xf32>, tensor<4x8x12xf32>, tensor<4x8x12xf32>, tensor<4x12x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xi32>, tensor<1x16x2xf32> -> tensor<1x16x8xf32>
  return %out : tensor<1x16x8xf32>
}

// -----

/// The expert outputs have another user: fusing would lose them.
// CHECK-LABEL: func.func @negative_swiglu_outputs_escape
// CHECK: vmoe.dispatch
// CHECK: vmoe.expert_swiglu
// CHECK: vmoe.combine
// CHECK-NOT: vmoe.fused_experts
func.func @negative_swiglu_outputs_escape(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x2xi32>, %w: tensor<1x16x2xf32>,
    %wg: tensor<4x8x12xf32>, %wu: tensor<4x8x12xf32>, %wd: tensor<4x12x8xf32>)
    -> (tensor<1x16x8xf32>, tensor<4x1x16x8xf32>) {
  %buf, %slots = vmoe.dispatch %x, %ids {capacity = 16 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32> -> tensor<4x1x16x8xf32>, tensor<1x16x2xi32>
  %y = vmoe.expert_swiglu %buf, %wg, %wu, %wd
      : tensor<4x1x16x8xf32>, tensor<4x8x12xf32>, tensor<4x8x12xf32>, tensor<4x12x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xi32>, tensor<1x16x2xf32> -> tensor<1x16x8xf32>
  return %out, %y : tensor<1x16x8xf32>, tensor<4x1x16x8xf32>
}

// -----

/// A dynamic hidden width: the zero biases need static shapes.
// CHECK-LABEL: func.func @negative_swiglu_dynamic_hidden
// CHECK: vmoe.expert_swiglu
// CHECK-NOT: vmoe.fused_experts
func.func @negative_swiglu_dynamic_hidden(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x2xi32>, %w: tensor<1x16x2xf32>,
    %wg: tensor<4x8x?xf32>, %wu: tensor<4x8x?xf32>, %wd: tensor<4x?x8xf32>) -> tensor<1x16x8xf32> {
  %buf, %slots = vmoe.dispatch %x, %ids {capacity = 16 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32> -> tensor<4x1x16x8xf32>, tensor<1x16x2xi32>
  %y = vmoe.expert_swiglu %buf, %wg, %wu, %wd
      : tensor<4x1x16x8xf32>, tensor<4x8x?xf32>, tensor<4x8x?xf32>, tensor<4x?x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xi32>, tensor<1x16x2xf32> -> tensor<1x16x8xf32>
  return %out : tensor<1x16x8xf32>
}
