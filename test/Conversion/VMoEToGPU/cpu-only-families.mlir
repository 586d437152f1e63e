// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-gpu -verify-diagnostics

// Expert choice and Soft MoE have CPU lowerings only (issue 11): the GPU
// lowering names the op instead of failing later in the kernel outliner.

func.func @negative_expert_choice_on_gpu(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) -> tensor<4x1x2xi32> {
  // expected-error @+1 {{'vmoe.expert_choice' op has no GPU lowering yet (expert choice and Soft MoE run on the CPU target)}}
  %g, %t, %s = vmoe.expert_choice %x, %r
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>
  return %t : tensor<4x1x2xi32>
}

// -----

func.func @negative_soft_moe_on_gpu(%x: tensor<1x5x10xf32>, %phi: tensor<10x8x2xf32>, %scale: tensor<f32>,
    %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>,
    %b2: tensor<8x10xf32>) -> tensor<1x5x10xf32> {
  // expected-error @+1 {{'vmoe.soft_moe' op has no GPU lowering yet (expert choice and Soft MoE run on the CPU target)}}
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<1x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return %o : tensor<1x5x10xf32>
}

// -----

/// Expert weights in the CPU microkernel's panel layout are packed for the
/// CPU target only.
func.func @negative_weight_panels(%x: tensor<1x8x32xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x4xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x4x32x16xf32>, %b1: tensor<4x64xf32>,
    %w2: tensor<4x2x64x16xf32>, %b2: tensor<4x32xf32>) -> tensor<1x8x32xf32> {
  // expected-error @+1 {{'vmoe.fused_experts' op weight_panels has no GPU lowering (weights are packed into panels for the CPU target only)}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2 {weight_panels = 16 : i64}
      : tensor<1x8x32xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x4xi32>, tensor<4x1xi32>,
        tensor<4x4x32x16xf32>, tensor<4x64xf32>, tensor<4x2x64x16xf32>, tensor<4x32xf32>
  return %o : tensor<1x8x32xf32>
}
