// RUN: vmoe-opt %s -split-input-file | vmoe-opt -split-input-file | FileCheck %s
// RUN: vmoe-opt %s -split-input-file --mlir-print-op-generic | vmoe-opt -split-input-file | FileCheck %s

// Round trip of bf16 pair panels (#vmoe.panel_storage<bf16_pairs>): two
// bf16 of consecutive k per f32 word, so the panels' K dim is ceil(K/2).

// CHECK-LABEL: func.func @unpack_panels_bf16_pairs
// CHECK: vmoe.unpack_panels %{{.*}} {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<32x32x1024x16xf32> -> tensor<32x2048x512xf32>
func.func @unpack_panels_bf16_pairs(%p: tensor<32x32x1024x16xf32>) -> tensor<32x2048x512xf32> {
  %w2 = vmoe.unpack_panels %p {storage = #vmoe.panel_storage<bf16_pairs>}
      : tensor<32x32x1024x16xf32> -> tensor<32x2048x512xf32>
  return %w2 : tensor<32x2048x512xf32>
}

// -----

// An odd K (5) needs ceil(5/2) = 3 pair rows; a partial last panel (10 of 16).
// CHECK-LABEL: func.func @unpack_panels_bf16_pairs_odd_k
// CHECK: {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<1x3x16xf32> -> tensor<5x10xf32>
func.func @unpack_panels_bf16_pairs_odd_k(%p: tensor<1x3x16xf32>) -> tensor<5x10xf32> {
  %w = vmoe.unpack_panels %p {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<1x3x16xf32> -> tensor<5x10xf32>
  return %w : tensor<5x10xf32>
}

// -----

// The default storage (f32) is not printed.
// CHECK-LABEL: func.func @unpack_panels_f32_storage_elided
// CHECK: vmoe.unpack_panels %{{.*}} : tensor<3x8x16xf32> -> tensor<8x40xf32>
func.func @unpack_panels_f32_storage_elided(%p: tensor<3x8x16xf32>) -> tensor<8x40xf32> {
  %w = vmoe.unpack_panels %p {storage = #vmoe.panel_storage<f32>} : tensor<3x8x16xf32> -> tensor<8x40xf32>
  return %w : tensor<8x40xf32>
}

// -----

// CHECK-LABEL: func.func @fused_experts_bf16_pairs
// CHECK: vmoe.fused_experts {{.*}} {weight_panels = 16 : i64, weight_storage = #vmoe.panel_storage<bf16_pairs>}
// CHECK-SAME: tensor<32x128x256x16xf32>, tensor<32x2048xf32>, tensor<32x32x1024x16xf32>, tensor<32x512xf32>
func.func @fused_experts_bf16_pairs(%x: tensor<1x400x512xf32>, %s: tensor<1x400x2xi32>, %w: tensor<1x400x2xf32>,
    %e: tensor<32x1x26xi32>, %f: tensor<32x1xi32>, %w1: tensor<32x128x256x16xf32>, %b1: tensor<32x2048xf32>,
    %w2: tensor<32x32x1024x16xf32>, %b2: tensor<32x512xf32>) -> tensor<1x400x512xf32> {
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      {weight_panels = 16 : i64, weight_storage = #vmoe.panel_storage<bf16_pairs>}
      : tensor<1x400x512xf32>, tensor<1x400x2xi32>, tensor<1x400x2xf32>, tensor<32x1x26xi32>, tensor<32x1xi32>,
        tensor<32x128x256x16xf32>, tensor<32x2048xf32>, tensor<32x32x1024x16xf32>, tensor<32x512xf32>
  return %o : tensor<1x400x512xf32>
}
