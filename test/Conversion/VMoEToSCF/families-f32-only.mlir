// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf -verify-diagnostics

// The expert choice and Soft MoE lowerings handle f32 only: other element
// types leave the op, and the conversion fails on it.

func.func @negative_expert_choice_experts_f16(%x: tensor<1x8x16xf16>, %g: tensor<1x8x4xf16>, %t: tensor<4x1x2xi32>,
    %s: tensor<1x8x4xi32>, %w1: tensor<4x16x32xf16>, %b1: tensor<4x32xf16>, %w2: tensor<4x32x16xf16>,
    %b2: tensor<4x16xf16>) -> tensor<1x8x16xf16> {
  // expected-error @+1 {{failed to legalize operation 'vmoe.expert_choice_experts' that was explicitly marked illegal}}
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf16>, tensor<1x8x4xf16>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x16x32xf16>, tensor<4x32xf16>, tensor<4x32x16xf16>, tensor<4x16xf16>
  return %o : tensor<1x8x16xf16>
}

// -----

func.func @negative_soft_moe_f16(%x: tensor<1x5x12xf16>, %phi: tensor<12x8x2xf16>, %scale: tensor<f16>,
    %w1: tensor<8x12x16xf16>, %b1: tensor<8x16xf16>, %w2: tensor<8x16x12xf16>,
    %b2: tensor<8x12xf16>) -> tensor<1x5x12xf16> {
  // expected-error @+1 {{failed to legalize operation 'vmoe.soft_moe' that was explicitly marked illegal}}
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<1x5x12xf16>, tensor<12x8x2xf16>, tensor<f16>, tensor<8x12x16xf16>, tensor<8x16xf16>,
        tensor<8x16x12xf16>, tensor<8x12xf16>
  return %o : tensor<1x5x12xf16>
}
