// RUN: vmoe-opt %s -split-input-file | vmoe-opt -split-input-file | FileCheck %s
// RUN: vmoe-opt %s -split-input-file --mlir-print-op-generic | vmoe-opt -split-input-file | FileCheck %s

// Round trip of vmoe.soft_moe in its custom and generic forms.

// CHECK-LABEL: func.func @soft_moe
// CHECK: vmoe.soft_moe %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {activation = #vmoe.activation<gelu_erf>}
// CHECK-SAME: : tensor<8x197x768xf32>, tensor<768x128x1xf32>, tensor<f32>, tensor<128x768x3072xf32>, tensor<128x3072xf32>, tensor<128x3072x768xf32>, tensor<128x768xf32>
func.func @soft_moe(%x: tensor<8x197x768xf32>, %phi: tensor<768x128x1xf32>, %scale: tensor<f32>,
    %w1: tensor<128x768x3072xf32>, %b1: tensor<128x3072xf32>, %w2: tensor<128x3072x768xf32>,
    %b2: tensor<128x768xf32>) -> tensor<8x197x768xf32> {
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<gelu_erf>}
      : tensor<8x197x768xf32>, tensor<768x128x1xf32>, tensor<f32>, tensor<128x768x3072xf32>,
        tensor<128x3072xf32>, tensor<128x3072x768xf32>, tensor<128x768xf32>
  return %o : tensor<8x197x768xf32>
}

// -----

// CHECK-LABEL: func.func @soft_moe_dynamic_groups_default_activation
// CHECK: vmoe.soft_moe %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK-SAME: tensor<?x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>
func.func @soft_moe_dynamic_groups_default_activation(%x: tensor<?x5x10xf32>, %phi: tensor<10x8x2xf32>,
    %scale: tensor<f32>, %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>,
    %b2: tensor<8x10xf32>) -> tensor<?x5x10xf32> {
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<?x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return %o : tensor<?x5x10xf32>
}

// -----

// CHECK-LABEL: func.func @soft_moe_valid
// CHECK: vmoe.soft_moe %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} valid(%{{.*}}) {activation = #vmoe.activation<relu>} :
func.func @soft_moe_valid(%x: tensor<2x5x10xf32>, %phi: tensor<10x8x2xf32>,
    %scale: tensor<f32>, %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>,
    %b2: tensor<8x10xf32>, %n: index) -> tensor<2x5x10xf32> {
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2 valid(%n) {activation = #vmoe.activation<relu>}
      : tensor<2x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return %o : tensor<2x5x10xf32>
}

// -----

/// soft_moe with weights in panel layout (the example of the op
/// description): w1 E x ceil(H/L) x D x L, w2 E x ceil(D/L) x H x L.
// CHECK-LABEL: func.func @soft_moe_weight_panels
// CHECK: vmoe.soft_moe %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {weight_panels = 16 : i64}
// CHECK-SAME: tensor<128x192x768x16xf32>, tensor<128x3072xf32>, tensor<128x48x3072x16xf32>, tensor<128x768xf32>
func.func @soft_moe_weight_panels(%x: tensor<8x197x768xf32>, %phi: tensor<768x128x1xf32>, %scale: tensor<f32>,
    %w1p: tensor<128x192x768x16xf32>, %b1: tensor<128x3072xf32>, %w2p: tensor<128x48x3072x16xf32>,
    %b2: tensor<128x768xf32>) -> tensor<8x197x768xf32> {
  %packed = vmoe.soft_moe %x, %phi, %scale, %w1p, %b1, %w2p, %b2
      {weight_panels = 16 : i64}
      : tensor<8x197x768xf32>, tensor<768x128x1xf32>, tensor<f32>,
        tensor<128x192x768x16xf32>, tensor<128x3072xf32>,
        tensor<128x48x3072x16xf32>, tensor<128x768xf32>
  return %packed : tensor<8x197x768xf32>
}

// -----

/// Panels with padding operand and dynamic groups.
// CHECK-LABEL: func.func @soft_moe_weight_panels_valid
// CHECK: vmoe.soft_moe {{.*}} valid(%{{.*}}) {weight_panels = 8 : i64}
// CHECK-SAME: tensor<8x2x10x8xf32>, tensor<8x12xf32>, tensor<8x2x12x8xf32>, tensor<8x10xf32>
func.func @soft_moe_weight_panels_valid(%x: tensor<?x5x10xf32>, %phi: tensor<10x8x2xf32>, %scale: tensor<f32>,
    %w1p: tensor<8x2x10x8xf32>, %b1: tensor<8x12xf32>, %w2p: tensor<8x2x12x8xf32>, %b2: tensor<8x10xf32>,
    %n: index) -> tensor<?x5x10xf32> {
  %o = vmoe.soft_moe %x, %phi, %scale, %w1p, %b1, %w2p, %b2 valid(%n) {weight_panels = 8 : i64}
      : tensor<?x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x2x10x8xf32>, tensor<8x12xf32>,
        tensor<8x2x12x8xf32>, tensor<8x10xf32>
  return %o : tensor<?x5x10xf32>
}
