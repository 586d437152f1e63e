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
