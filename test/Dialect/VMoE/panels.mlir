// RUN: vmoe-opt %s -split-input-file | vmoe-opt -split-input-file | FileCheck %s
// RUN: vmoe-opt %s -split-input-file --mlir-print-op-generic | vmoe-opt -split-input-file | FileCheck %s

// Round trip of the GEMM panel layout: vmoe.unpack_panels and
// vmoe.fused_experts reading its weights as panels (weight_panels).

// CHECK-LABEL: func.func @unpack_panels_expert_kernel
// CHECK: vmoe.unpack_panels %{{.*}} : tensor<32x128x512x16xf32> -> tensor<32x512x2048xf32>
func.func @unpack_panels_expert_kernel(%p: tensor<32x128x512x16xf32>) -> tensor<32x512x2048xf32> {
  %w1 = vmoe.unpack_panels %p : tensor<32x128x512x16xf32> -> tensor<32x512x2048xf32>
  return %w1 : tensor<32x512x2048xf32>
}

// -----

// The last panel is zero-padded: 3 panels of 16 hold 40 columns.
// CHECK-LABEL: func.func @unpack_panels_padded_rank3
// CHECK: vmoe.unpack_panels %{{.*}} : tensor<3x8x16xf32> -> tensor<8x40xf32>
func.func @unpack_panels_padded_rank3(%p: tensor<3x8x16xf32>) -> tensor<8x40xf32> {
  %w = vmoe.unpack_panels %p : tensor<3x8x16xf32> -> tensor<8x40xf32>
  return %w : tensor<8x40xf32>
}

// -----

// CHECK-LABEL: func.func @fused_experts_weight_panels
// CHECK: vmoe.fused_experts {{.*}} {weight_panels = 16 : i64}
// CHECK-SAME: tensor<32x128x512x16xf32>, tensor<32x2048xf32>, tensor<32x32x2048x16xf32>, tensor<32x512xf32>
func.func @fused_experts_weight_panels(%x: tensor<1x400x512xf32>, %s: tensor<1x400x2xi32>, %w: tensor<1x400x2xf32>,
    %e: tensor<32x1x26xi32>, %f: tensor<32x1xi32>, %w1: tensor<32x128x512x16xf32>, %b1: tensor<32x2048xf32>,
    %w2: tensor<32x32x2048x16xf32>, %b2: tensor<32x512xf32>) -> tensor<1x400x512xf32> {
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2 {weight_panels = 16 : i64}
      : tensor<1x400x512xf32>, tensor<1x400x2xi32>, tensor<1x400x2xf32>, tensor<32x1x26xi32>, tensor<32x1xi32>,
        tensor<32x128x512x16xf32>, tensor<32x2048xf32>, tensor<32x32x2048x16xf32>, tensor<32x512xf32>
  return %o : tensor<1x400x512xf32>
}
