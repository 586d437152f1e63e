// RUN: vmoe-opt %s -split-input-file -verify-diagnostics

// One case per verifier rule of the expert choice ops (docs/Dialect.md).

/// expert_choice-C1: x is G x S x D.
func.func @negative_expert_choice_x_rank(%x: tensor<8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{'x' must have rank 3 (G x S x D), got rank 2}}
  %g, %t, %s = vmoe.expert_choice %x, %r
      : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>
  return
}

// -----

/// expert_choice-C1: the router is D x E with the D of x.
func.func @negative_expert_choice_router_width(%x: tensor<1x8x16xf32>, %r: tensor<8x4xf32>) {
  // expected-error @+1 {{'router' dim 0 (8) must equal the model width D of 'x' (16)}}
  %g, %t, %s = vmoe.expert_choice %x, %r
      : tensor<1x8x16xf32>, tensor<8x4xf32> -> tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>
  return
}

// -----

/// expert_choice-C2: gates are G x S x E.
func.func @negative_expert_choice_gates(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{'gates' must have shape 1x8x4 (G x S x E), got 1x8x3}}
  %g, %t, %s = vmoe.expert_choice %x, %r
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x3xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>
  return
}

// -----

/// expert_choice-C3: token_ids are E x G x B.
func.func @negative_expert_choice_token_ids_experts(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{'token_ids' must have shape 4x1x? (E x G x B), got 3x1x2}}
  %g, %t, %s = vmoe.expert_choice %x, %r
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<3x1x2xi32>, tensor<1x8x4xi32>
  return
}

// -----

/// expert_choice-C3: B is static.
func.func @negative_expert_choice_dynamic_capacity(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{'token_ids' must have a static E and B >= 1, got 4x1x?}}
  %g, %t, %s = vmoe.expert_choice %x, %r
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<4x1x?xi32>, tensor<1x8x4xi32>
  return
}

// -----

/// expert_choice-C3: B >= 1 (a zero dimension is caught first by vmoe-C1).
func.func @negative_expert_choice_zero_capacity(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{result #1 dim 2 must be in [1, 16777216], got 0 in 'tensor<4x1x0xi32>'}}
  %g, %t, %s = vmoe.expert_choice %x, %r
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<4x1x0xi32>, tensor<1x8x4xi32>
  return
}

// -----

/// expert_choice-C4: slots are G x S x E.
func.func @negative_expert_choice_slots(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{'slots' must have shape 1x8x4 (G x S x E), got 1x8x2}}
  %g, %t, %s = vmoe.expert_choice %x, %r
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x2xi32>
  return
}

// -----

/// expert_choice-C5: one float element type for x, router and gates.
func.func @negative_expert_choice_element_type(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf16>) {
  // expected-error @+1 {{failed to verify that all of {x, router, gates} have same element type}}
  %g, %t, %s = vmoe.expert_choice %x, %r
      : tensor<1x8x16xf32>, tensor<16x4xf16> -> tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>
  return
}

// -----

/// expert_choice_experts-C1: x is G x S x D.
func.func @negative_expert_choice_experts_x_rank(%x: tensor<8x16xf32>, %g: tensor<1x8x4xf32>,
    %t: tensor<4x1x2xi32>, %s: tensor<1x8x4xi32>, %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x32x16xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{'x' must have rank 3 (G x S x D), got rank 2}}
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return
}

// -----

/// expert_choice_experts-C2: token_ids are E x G x B with the G of x.
func.func @negative_expert_choice_experts_token_ids(%x: tensor<2x8x16xf32>, %g: tensor<2x8x4xf32>,
    %t: tensor<4x1x2xi32>, %s: tensor<2x8x4xi32>, %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x32x16xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{'token_ids' must have shape ?x2x? (E x G x B), got 4x1x2}}
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<2x8x16xf32>, tensor<2x8x4xf32>, tensor<4x1x2xi32>, tensor<2x8x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return
}

// -----

/// expert_choice_experts-C2: E is static.
func.func @negative_expert_choice_experts_dynamic_experts(%x: tensor<1x8x16xf32>, %g: tensor<1x8x?xf32>,
    %t: tensor<?x1x2xi32>, %s: tensor<1x8x?xi32>, %w1: tensor<?x16x32xf32>, %b1: tensor<?x32xf32>,
    %w2: tensor<?x32x16xf32>, %b2: tensor<?x16xf32>) {
  // expected-error @+1 {{'token_ids' dim 0 (E) must be static}}
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x?xf32>, tensor<?x1x2xi32>, tensor<1x8x?xi32>,
        tensor<?x16x32xf32>, tensor<?x32xf32>, tensor<?x32x16xf32>, tensor<?x16xf32>
  return
}

// -----

/// expert_choice_experts-C3: gates are G x S x E.
func.func @negative_expert_choice_experts_gates(%x: tensor<1x8x16xf32>, %g: tensor<1x8x3xf32>,
    %t: tensor<4x1x2xi32>, %s: tensor<1x8x4xi32>, %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x32x16xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{'gates' must have shape 1x8x4 (G x S x E), got 1x8x3}}
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x3xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return
}

// -----

/// expert_choice_experts-C3: slots are G x S x E.
func.func @negative_expert_choice_experts_slots(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf32>,
    %t: tensor<4x1x2xi32>, %s: tensor<1x7x4xi32>, %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x32x16xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{'slots' must have shape 1x8x4 (G x S x E), got 1x7x4}}
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x7x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return
}

// -----

/// expert_choice_experts-C4: w1 is E x D x H.
func.func @negative_expert_choice_experts_w1(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf32>,
    %t: tensor<4x1x2xi32>, %s: tensor<1x8x4xi32>, %w1: tensor<4x12x32xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x32x16xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{'w1' must have shape 4x16x32 (E x D x H), got 4x12x32}}
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x12x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return
}

// -----

/// expert_choice_experts-C4: b2 is E x D.
func.func @negative_expert_choice_experts_b2(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf32>,
    %t: tensor<4x1x2xi32>, %s: tensor<1x8x4xi32>, %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x32x16xf32>, %b2: tensor<4x32xf32>) {
  // expected-error @+1 {{'b2' must have shape 4x16 (E x D), got 4x32}}
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x32xf32>
  return
}

// -----

/// expert_choice_experts-C5: one float element type.
func.func @negative_expert_choice_experts_element_type(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf16>,
    %t: tensor<4x1x2xi32>, %s: tensor<1x8x4xi32>, %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x32x16xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{failed to verify that all of {x, gates, w1, b1, w2, b2} have same element type}}
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x4xf16>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return
}

// -----

/// expert_choice-C6: the valid-token count is an index.
func.func @negative_expert_choice_valid_not_index(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>, %n: i32) {
  // expected-error @+1 {{operand #2 must be index, but got 'i32'}}
  %g, %t, %s = "vmoe.expert_choice"(%x, %r, %n) <{operandSegmentSizes = array<i32: 1, 1, 0, 1>}>
      : (tensor<1x8x16xf32>, tensor<16x4xf32>, i32) -> (tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>)
  return
}

// -----

/// expert_choice_experts-C6: with weight_panels, w1 is E x ceil(H/L) x D x L.
func.func @negative_expert_choice_experts_panels_w1(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf32>,
    %t: tensor<4x1x2xi32>, %s: tensor<1x8x4xi32>, %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x1x32x16xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{'w1' must have rank 4 (E x ceil(H/L) x D x L), got rank 3}}
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2 {weight_panels = 16 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x1x32x16xf32>, tensor<4x16xf32>
  return
}

// -----

/// expert_choice_experts-C6: with weight_panels, w2 is E x ceil(D/L) x H x L
/// (H from b1).
func.func @negative_expert_choice_experts_panels_w2(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf32>,
    %t: tensor<4x1x2xi32>, %s: tensor<1x8x4xi32>, %w1: tensor<4x2x16x16xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x1x32x8xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{'w2' must have shape 4x1x32x16 (E x ceil(D/L) x H x L), got 4x1x32x8}}
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2 {weight_panels = 16 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x2x16x16xf32>, tensor<4x32xf32>, tensor<4x1x32x8xf32>, tensor<4x16xf32>
  return
}

// -----

/// expert_choice_experts-C6: the panel width is positive.
func.func @negative_expert_choice_experts_panels_zero(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf32>,
    %t: tensor<4x1x2xi32>, %s: tensor<1x8x4xi32>, %w1: tensor<4x2x16x16xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x1x32x16xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{attribute 'weight_panels' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2 {weight_panels = 0 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x2x16x16xf32>, tensor<4x32xf32>, tensor<4x1x32x16xf32>, tensor<4x16xf32>
  return
}
