// RUN: vmoe-opt %s -split-input-file -vmoe-fuse-experts | FileCheck %s

// Expert choice and Soft MoE expert weights stored in panel layout: the ops
// read the panels (weight_panels) and the unpack ops disappear.

// CHECK-LABEL: func.func @expert_choice_experts_panels
// CHECK-SAME: %[[P1:[a-z0-9]+]]: tensor<4x2x16x16xf32>, %[[B1:[a-z0-9]+]]: tensor<4x32xf32>, %[[P2:[a-z0-9]+]]: tensor<4x1x32x16xf32>
// CHECK-NOT: vmoe.unpack_panels
// CHECK: vmoe.expert_choice_experts %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[P1]], %[[B1]], %[[P2]], %{{.*}} {activation = #vmoe.activation<relu>, weight_panels = 16 : i64}
// CHECK-SAME: tensor<4x2x16x16xf32>, tensor<4x32xf32>, tensor<4x1x32x16xf32>, tensor<4x16xf32>
// CHECK-NOT: vmoe.unpack_panels
func.func @expert_choice_experts_panels(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf32>, %t: tensor<4x1x2xi32>,
    %s: tensor<1x8x4xi32>, %p1: tensor<4x2x16x16xf32>, %b1: tensor<4x32xf32>, %p2: tensor<4x1x32x16xf32>,
    %b2: tensor<4x16xf32>) -> tensor<1x8x16xf32> {
  %w1 = vmoe.unpack_panels %p1 : tensor<4x2x16x16xf32> -> tensor<4x16x32xf32>
  %w2 = vmoe.unpack_panels %p2 : tensor<4x1x32x16xf32> -> tensor<4x32x16xf32>
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<relu>}
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return %o : tensor<1x8x16xf32>
}

// -----

// CHECK-LABEL: func.func @soft_moe_panels
// CHECK-SAME: %[[P1:[a-z0-9]+]]: tensor<8x2x10x8xf32>, %[[B1:[a-z0-9]+]]: tensor<8x12xf32>, %[[P2:[a-z0-9]+]]: tensor<8x2x12x8xf32>
// CHECK-NOT: vmoe.unpack_panels
// CHECK: vmoe.soft_moe %{{.*}}, %{{.*}}, %{{.*}}, %[[P1]], %[[B1]], %[[P2]], %{{.*}} valid(%{{.*}}) {weight_panels = 8 : i64}
// CHECK-NOT: vmoe.unpack_panels
func.func @soft_moe_panels(%x: tensor<1x5x10xf32>, %phi: tensor<10x8x2xf32>, %scale: tensor<f32>,
    %p1: tensor<8x2x10x8xf32>, %b1: tensor<8x12xf32>, %p2: tensor<8x2x12x8xf32>, %b2: tensor<8x10xf32>,
    %n: index) -> tensor<1x5x10xf32> {
  %w1 = vmoe.unpack_panels %p1 : tensor<8x2x10x8xf32> -> tensor<8x10x12xf32>
  %w2 = vmoe.unpack_panels %p2 : tensor<8x2x12x8xf32> -> tensor<8x12x10xf32>
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2 valid(%n)
      : tensor<1x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return %o : tensor<1x5x10xf32>
}

// -----

/// The unpacked weights have another user: the op reads the panels, the
/// unpack op stays for that user.
// CHECK-LABEL: func.func @soft_moe_panels_shared_unpack
// CHECK: %[[W1:.*]] = vmoe.unpack_panels
// CHECK-NOT: vmoe.unpack_panels
// CHECK: vmoe.soft_moe {{.*}}weight_panels = 8 : i64
// CHECK: return %{{.*}}, %[[W1]]
func.func @soft_moe_panels_shared_unpack(%x: tensor<1x5x10xf32>, %phi: tensor<10x8x2xf32>, %scale: tensor<f32>,
    %p1: tensor<8x2x10x8xf32>, %b1: tensor<8x12xf32>, %p2: tensor<8x2x12x8xf32>, %b2: tensor<8x10xf32>)
    -> (tensor<1x5x10xf32>, tensor<8x10x12xf32>) {
  %w1 = vmoe.unpack_panels %p1 : tensor<8x2x10x8xf32> -> tensor<8x10x12xf32>
  %w2 = vmoe.unpack_panels %p2 : tensor<8x2x12x8xf32> -> tensor<8x12x10xf32>
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<1x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return %o, %w1 : tensor<1x5x10xf32>, tensor<8x10x12xf32>
}

// -----

/// Only w1 comes in panels: both weights stay plain (one layout for both).
// CHECK-LABEL: func.func @negative_expert_choice_one_panel_weight
// CHECK: vmoe.unpack_panels
// CHECK: vmoe.expert_choice_experts
// CHECK-NOT: weight_panels
func.func @negative_expert_choice_one_panel_weight(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf32>,
    %t: tensor<4x1x2xi32>, %s: tensor<1x8x4xi32>, %p1: tensor<4x2x16x16xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x32x16xf32>, %b2: tensor<4x16xf32>) -> tensor<1x8x16xf32> {
  %w1 = vmoe.unpack_panels %p1 : tensor<4x2x16x16xf32> -> tensor<4x16x32xf32>
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return %o : tensor<1x8x16xf32>
}

// -----

/// Panels of two widths: no common weight_panels.
// CHECK-LABEL: func.func @negative_expert_choice_mixed_panel_widths
// CHECK-COUNT-2: vmoe.unpack_panels
// CHECK: vmoe.expert_choice_experts
// CHECK-NOT: weight_panels
func.func @negative_expert_choice_mixed_panel_widths(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf32>,
    %t: tensor<4x1x2xi32>, %s: tensor<1x8x4xi32>, %p1: tensor<4x2x16x16xf32>, %b1: tensor<4x32xf32>,
    %p2: tensor<4x2x32x8xf32>, %b2: tensor<4x16xf32>) -> tensor<1x8x16xf32> {
  %w1 = vmoe.unpack_panels %p1 : tensor<4x2x16x16xf32> -> tensor<4x16x32xf32>
  %w2 = vmoe.unpack_panels %p2 : tensor<4x2x32x8xf32> -> tensor<4x32x16xf32>
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return %o : tensor<1x8x16xf32>
}

// -----

/// bf16 pair panels: these ops have no bf16 GEMMs, the weights stay
/// unpacked (to f32).
// CHECK-LABEL: func.func @negative_soft_moe_bf16_pair_panels
// CHECK-COUNT-2: vmoe.unpack_panels
// CHECK: vmoe.soft_moe
// CHECK-NOT: weight_panels
func.func @negative_soft_moe_bf16_pair_panels(%x: tensor<1x5x16xf32>, %phi: tensor<16x8x2xf32>, %scale: tensor<f32>,
    %p1: tensor<8x1x8x16xf32>, %b1: tensor<8x16xf32>, %p2: tensor<8x1x8x16xf32>, %b2: tensor<8x16xf32>)
    -> tensor<1x5x16xf32> {
  %w1 = vmoe.unpack_panels %p1 {storage = #vmoe.panel_storage<bf16_pairs>}
      : tensor<8x1x8x16xf32> -> tensor<8x16x16xf32>
  %w2 = vmoe.unpack_panels %p2 {storage = #vmoe.panel_storage<bf16_pairs>}
      : tensor<8x1x8x16xf32> -> tensor<8x16x16xf32>
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<1x5x16xf32>, tensor<16x8x2xf32>, tensor<f32>, tensor<8x16x16xf32>, tensor<8x16xf32>,
        tensor<8x16x16xf32>, tensor<8x16xf32>
  return %o : tensor<1x5x16xf32>
}
