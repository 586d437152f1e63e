// RUN: vmoe-opt %s -split-input-file -verify-diagnostics

// One case per verifier rule of vmoe.soft_moe (docs/Dialect.md).

/// soft_moe-C1: x is G x S x D.
func.func @negative_soft_moe_x_rank(%x: tensor<5x10xf32>, %phi: tensor<10x8x2xf32>, %scale: tensor<f32>,
    %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>, %b2: tensor<8x10xf32>) {
  // expected-error @+1 {{'x' must have rank 3 (G x S x D), got rank 2}}
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return
}

// -----

/// soft_moe-C2: phi is D x E x P.
func.func @negative_soft_moe_phi_rank(%x: tensor<1x5x10xf32>, %phi: tensor<10x16xf32>, %scale: tensor<f32>,
    %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>, %b2: tensor<8x10xf32>) {
  // expected-error @+1 {{'phi' must have rank 3 (D x E x P), got rank 2}}
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<1x5x10xf32>, tensor<10x16xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return
}

// -----

/// soft_moe-C2: phi dim 0 is the model width of x.
func.func @negative_soft_moe_phi_width(%x: tensor<1x5x10xf32>, %phi: tensor<12x8x2xf32>, %scale: tensor<f32>,
    %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>, %b2: tensor<8x10xf32>) {
  // expected-error @+1 {{'phi' dim 0 (12) must equal the model width D of 'x' (10)}}
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<1x5x10xf32>, tensor<12x8x2xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return
}

// -----

/// soft_moe-C3: scale is a 0-d tensor.
func.func @negative_soft_moe_scale_rank(%x: tensor<1x5x10xf32>, %phi: tensor<10x8x2xf32>, %scale: tensor<1xf32>,
    %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>, %b2: tensor<8x10xf32>) {
  // expected-error @+1 {{operand #2 must be 0D tensor of floating-point values, but got 'tensor<1xf32>'}}
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<1x5x10xf32>, tensor<10x8x2xf32>, tensor<1xf32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return
}

// -----

/// soft_moe-C4: the experts are those of phi (E).
func.func @negative_soft_moe_w1_experts(%x: tensor<1x5x10xf32>, %phi: tensor<10x8x2xf32>, %scale: tensor<f32>,
    %w1: tensor<4x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>, %b2: tensor<8x10xf32>) {
  // expected-error @+1 {{'w1' must have shape 8x10x12 (E x D x H), got 4x10x12}}
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<1x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<4x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return
}

// -----

/// soft_moe-C4: w2 is E x H x D.
func.func @negative_soft_moe_w2(%x: tensor<1x5x10xf32>, %phi: tensor<10x8x2xf32>, %scale: tensor<f32>,
    %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x16x10xf32>, %b2: tensor<8x10xf32>) {
  // expected-error @+1 {{'w2' must have shape 8x12x10 (E x H x D), got 8x16x10}}
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<1x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x16x10xf32>, tensor<8x10xf32>
  return
}

// -----

/// soft_moe-C5: one float element type.
func.func @negative_soft_moe_element_type(%x: tensor<1x5x10xf32>, %phi: tensor<10x8x2xf32>, %scale: tensor<f16>,
    %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>, %b2: tensor<8x10xf32>) {
  // expected-error @+1 {{failed to verify that all of {x, phi, scale, w1, b1, w2, b2} have same element type}}
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<1x5x10xf32>, tensor<10x8x2xf32>, tensor<f16>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return
}

// -----

/// soft_moe-C1: the output has the type of x.
func.func @negative_soft_moe_output_type(%x: tensor<1x5x10xf32>, %phi: tensor<10x8x2xf32>, %scale: tensor<f32>,
    %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>, %b2: tensor<8x10xf32>) {
  // expected-error @+1 {{failed to verify that all of {x, output} have same type}}
  %o = "vmoe.soft_moe"(%x, %phi, %scale, %w1, %b1, %w2, %b2)
      : (tensor<1x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
         tensor<8x12x10xf32>, tensor<8x10xf32>) -> tensor<2x5x10xf32>
  return
}

// -----

/// soft_moe-C6: the valid-token count is an index.
func.func @negative_soft_moe_valid_not_index(%x: tensor<2x5x10xf32>, %phi: tensor<10x8x2xf32>,
    %scale: tensor<f32>, %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>,
    %b2: tensor<8x10xf32>, %n: i64) {
  // expected-error @+1 {{operand #7 must be index, but got 'i64'}}
  %o = "vmoe.soft_moe"(%x, %phi, %scale, %w1, %b1, %w2, %b2, %n)
      : (tensor<2x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
         tensor<8x12x10xf32>, tensor<8x10xf32>, i64) -> tensor<2x5x10xf32>
  return
}

// -----

/// soft_moe-C7: with weight_panels, w1 is E x ceil(H/L) x D x L (H from b1).
func.func @negative_soft_moe_panels_w1(%x: tensor<1x5x10xf32>, %phi: tensor<10x8x2xf32>, %scale: tensor<f32>,
    %w1: tensor<8x1x10x8xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x2x12x8xf32>, %b2: tensor<8x10xf32>) {
  // expected-error @+1 {{'w1' must have shape 8x2x10x8 (E x ceil(H/L) x D x L), got 8x1x10x8}}
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2 {weight_panels = 8 : i64}
      : tensor<1x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x1x10x8xf32>, tensor<8x12xf32>,
        tensor<8x2x12x8xf32>, tensor<8x10xf32>
  return
}

// -----

/// soft_moe-C7: the experts of the panels are those of phi (E).
func.func @negative_soft_moe_panels_w2_experts(%x: tensor<1x5x10xf32>, %phi: tensor<10x8x2xf32>, %scale: tensor<f32>,
    %w1: tensor<8x2x10x8xf32>, %b1: tensor<8x12xf32>, %w2: tensor<4x2x12x8xf32>, %b2: tensor<8x10xf32>) {
  // expected-error @+1 {{'w2' must have shape 8x2x12x8 (E x ceil(D/L) x H x L), got 4x2x12x8}}
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2 {weight_panels = 8 : i64}
      : tensor<1x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x2x10x8xf32>, tensor<8x12xf32>,
        tensor<4x2x12x8xf32>, tensor<8x10xf32>
  return
}
