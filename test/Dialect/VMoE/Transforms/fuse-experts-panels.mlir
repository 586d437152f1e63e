// RUN: vmoe-opt %s -split-input-file -vmoe-fuse-experts | FileCheck %s

// Expert weights stored in panel layout: the fused op reads the panels
// (weight_panels) and the unpack ops disappear.
// CHECK-LABEL: func.func @fuse_panels
// CHECK-SAME: %[[P1:[a-z0-9]+]]: tensor<4x1x8x16xf32>, %[[B1:[a-z0-9]+]]: tensor<4x16xf32>, %[[P2:[a-z0-9]+]]: tensor<4x1x16x16xf32>
// CHECK-NOT: vmoe.unpack_panels
// CHECK: vmoe.fused_experts %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[P1]], %[[B1]], %[[P2]], %{{.*}} {activation = #vmoe.activation<relu>, weight_panels = 16 : i64}
// CHECK-NOT: vmoe.unpack_panels
func.func @fuse_panels(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x2xi32>, %o: tensor<1x16xi32>,
    %w: tensor<1x16x2xf32>, %p1: tensor<4x1x8x16xf32>, %b1: tensor<4x16xf32>,
    %p2: tensor<4x1x16x16xf32>, %b2: tensor<4x8xf32>) -> tensor<1x16x8xf32> {
  %w1 = vmoe.unpack_panels %p1 : tensor<4x1x8x16xf32> -> tensor<4x8x16xf32>
  %w2 = vmoe.unpack_panels %p2 : tensor<4x1x16x16xf32> -> tensor<4x16x8xf32>
  %buf, %slots = vmoe.dispatch %x, %ids, %o {capacity = 8 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<4x1x8x8xf32>, tensor<1x16x2xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<relu>}
      : tensor<4x1x8x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x8x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xi32>, tensor<1x16x2xf32> -> tensor<1x16x8xf32>
  return %out : tensor<1x16x8xf32>
}

// -----

/// Only w1 in panel layout: the fused op takes plain weights (the unpack
/// stays and lowers to a copy).
// CHECK-LABEL: func.func @negative_fuse_one_panel_weight
// CHECK: %[[W1:.*]] = vmoe.unpack_panels
// CHECK: vmoe.fused_experts %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[W1]], %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK-NOT: weight_panels
func.func @negative_fuse_one_panel_weight(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x2xi32>, %o: tensor<1x16xi32>,
    %w: tensor<1x16x2xf32>, %p1: tensor<4x1x8x16xf32>, %b1: tensor<4x16xf32>,
    %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) -> tensor<1x16x8xf32> {
  %w1 = vmoe.unpack_panels %p1 : tensor<4x1x8x16xf32> -> tensor<4x8x16xf32>
  %buf, %slots = vmoe.dispatch %x, %ids, %o {capacity = 8 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<4x1x8x8xf32>, tensor<1x16x2xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<4x1x8x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x8x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xi32>, tensor<1x16x2xf32> -> tensor<1x16x8xf32>
  return %out : tensor<1x16x8xf32>
}

// -----

/// Panels of different widths: plain weights.
// CHECK-LABEL: func.func @negative_fuse_mixed_panel_widths
// CHECK-COUNT-2: vmoe.unpack_panels
// CHECK-NOT: weight_panels
func.func @negative_fuse_mixed_panel_widths(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x2xi32>, %o: tensor<1x16xi32>,
    %w: tensor<1x16x2xf32>, %p1: tensor<4x1x8x16xf32>, %b1: tensor<4x16xf32>,
    %p2: tensor<4x1x16x8xf32>, %b2: tensor<4x8xf32>) -> tensor<1x16x8xf32> {
  %w1 = vmoe.unpack_panels %p1 : tensor<4x1x8x16xf32> -> tensor<4x8x16xf32>
  %w2 = vmoe.unpack_panels %p2 : tensor<4x1x16x8xf32> -> tensor<4x16x8xf32>
  %buf, %slots = vmoe.dispatch %x, %ids, %o {capacity = 8 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<4x1x8x8xf32>, tensor<1x16x2xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<4x1x8x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x8x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xi32>, tensor<1x16x2xf32> -> tensor<1x16x8xf32>
  return %out : tensor<1x16x8xf32>
}

// -----

// bf16 pair panels: the fused op takes them with their storage.
// CHECK-LABEL: func.func @fuse_bf16_pair_panels
// CHECK-SAME: %[[P1:[a-z0-9]+]]: tensor<4x1x4x16xf32>, %[[B1:[a-z0-9]+]]: tensor<4x16xf32>, %[[P2:[a-z0-9]+]]: tensor<4x1x8x16xf32>
// CHECK-NOT: vmoe.unpack_panels
// CHECK: vmoe.fused_experts %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[P1]], %[[B1]], %[[P2]], %{{.*}} {weight_panels = 16 : i64, weight_storage = #vmoe.panel_storage<bf16_pairs>}
// CHECK-NOT: vmoe.unpack_panels
func.func @fuse_bf16_pair_panels(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x2xi32>, %o: tensor<1x16xi32>,
    %w: tensor<1x16x2xf32>, %p1: tensor<4x1x4x16xf32>, %b1: tensor<4x16xf32>,
    %p2: tensor<4x1x8x16xf32>, %b2: tensor<4x8xf32>) -> tensor<1x16x8xf32> {
  %w1 = vmoe.unpack_panels %p1 {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<4x1x4x16xf32> -> tensor<4x8x16xf32>
  %w2 = vmoe.unpack_panels %p2 {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<4x1x8x16xf32> -> tensor<4x16x8xf32>
  %buf, %slots = vmoe.dispatch %x, %ids, %o {capacity = 8 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<4x1x8x8xf32>, tensor<1x16x2xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<4x1x8x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x8x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xi32>, tensor<1x16x2xf32> -> tensor<1x16x8xf32>
  return %out : tensor<1x16x8xf32>
}

// -----

/// One kernel in bf16 pairs, one in f32 panels: plain weights (both unpacks
/// stay and lower to copies).
// CHECK-LABEL: func.func @negative_fuse_mixed_panel_storage
// CHECK-COUNT-2: vmoe.unpack_panels
// CHECK-NOT: weight_panels
func.func @negative_fuse_mixed_panel_storage(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x2xi32>, %o: tensor<1x16xi32>,
    %w: tensor<1x16x2xf32>, %p1: tensor<4x1x4x16xf32>, %b1: tensor<4x16xf32>,
    %p2: tensor<4x1x16x16xf32>, %b2: tensor<4x8xf32>) -> tensor<1x16x8xf32> {
  %w1 = vmoe.unpack_panels %p1 {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<4x1x4x16xf32> -> tensor<4x8x16xf32>
  %w2 = vmoe.unpack_panels %p2 : tensor<4x1x16x16xf32> -> tensor<4x16x8xf32>
  %buf, %slots = vmoe.dispatch %x, %ids, %o {capacity = 8 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<4x1x8x8xf32>, tensor<1x16x2xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<4x1x8x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x8x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xi32>, tensor<1x16x2xf32> -> tensor<1x16x8xf32>
  return %out : tensor<1x16x8xf32>
}
