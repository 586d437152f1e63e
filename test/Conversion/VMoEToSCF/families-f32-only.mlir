// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf -verify-diagnostics

// The lowerings handle f32 only (SPEC §11): the pass rejects other float
// element types before converting, naming the supported one.

func.func @negative_expert_choice_experts_f16(%x: tensor<1x8x16xf16>, %g: tensor<1x8x4xf16>, %t: tensor<4x1x2xi32>,
    %s: tensor<1x8x4xi32>, %w1: tensor<4x16x32xf16>, %b1: tensor<4x32xf16>, %w2: tensor<4x32x16xf16>,
    %b2: tensor<4x16xf16>) -> tensor<1x8x16xf16> {
  // expected-error @+1 {{'vmoe.expert_choice_experts' op element type 'f16' is not supported by the lowering (supported element types: f32)}}
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf16>, tensor<1x8x4xf16>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x16x32xf16>, tensor<4x32xf16>, tensor<4x32x16xf16>, tensor<4x16xf16>
  return %o : tensor<1x8x16xf16>
}

// -----

func.func @negative_soft_moe_f16(%x: tensor<1x5x12xf16>, %phi: tensor<12x8x2xf16>, %scale: tensor<f16>,
    %w1: tensor<8x12x16xf16>, %b1: tensor<8x16xf16>, %w2: tensor<8x16x12xf16>,
    %b2: tensor<8x12xf16>) -> tensor<1x5x12xf16> {
  // expected-error @+1 {{'vmoe.soft_moe' op element type 'f16' is not supported by the lowering (supported element types: f32)}}
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<1x5x12xf16>, tensor<12x8x2xf16>, tensor<f16>, tensor<8x12x16xf16>, tensor<8x16xf16>,
        tensor<8x16x12xf16>, tensor<8x12xf16>
  return %o : tensor<1x5x12xf16>
}

// -----

func.func @negative_fused_experts_bf16(%x: tensor<1x8x16xbf16>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xbf16>,
    %e: tensor<4x1x4xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x16x32xbf16>, %b1: tensor<4x32xbf16>,
    %w2: tensor<4x32x16xbf16>, %b2: tensor<4x16xbf16>) -> tensor<1x8x16xbf16> {
  // expected-error @+1 {{'vmoe.fused_experts' op element type 'bf16' is not supported by the lowering (supported element types: f32)}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      : tensor<1x8x16xbf16>, tensor<1x8x2xi32>, tensor<1x8x2xbf16>, tensor<4x1x4xi32>, tensor<4x1xi32>,
        tensor<4x16x32xbf16>, tensor<4x32xbf16>, tensor<4x32x16xbf16>, tensor<4x16xbf16>
  return %o : tensor<1x8x16xbf16>
}

// -----

func.func @negative_route_f64(%x: tensor<1x8x16xf64>, %r: tensor<16x4xf64>) -> tensor<1x8x2xi32> {
  // expected-error @+1 {{'vmoe.route' op element type 'f64' is not supported by the lowering (supported element types: f32)}}
  %g, %i, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x8x16xf64>, tensor<16x4xf64> -> tensor<1x8x4xf64>, tensor<1x8x2xi32>, tensor<1x8x2xf64>
  return %i : tensor<1x8x2xi32>
}
