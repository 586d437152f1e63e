// RUN: vmoe-opt %s -split-input-file -verify-diagnostics

// One case per verifier rule of vmoe.router_losses and vmoe.expert_swiglu
// (docs/Dialect.md).

/// router_losses-C1: x is G x S x D.
func.func @negative_router_losses_x_rank(%x: tensor<5x10xf32>, %r: tensor<10x4xf32>) {
  // expected-error @+1 {{'x' must have rank 3 (G x S x D), got rank 2}}
  %i, %l, %g = vmoe.router_losses %x, %r {k = 1 : i64}
      : tensor<5x10xf32>, tensor<10x4xf32> -> tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
  return
}

// -----

/// router_losses-C1: router dim 0 is the model width of x.
func.func @negative_router_losses_router_width(%x: tensor<1x5x10xf32>, %r: tensor<12x4xf32>) {
  // expected-error @+1 {{'router' dim 0 (12) must equal the model width D of 'x' (10)}}
  %i, %l, %g = vmoe.router_losses %x, %r {k = 1 : i64}
      : tensor<1x5x10xf32>, tensor<12x4xf32> -> tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
  return
}

// -----

/// router_losses-C2: k <= E.
func.func @negative_router_losses_k_above_e(%x: tensor<1x5x10xf32>, %r: tensor<10x4xf32>) {
  // expected-error @+1 {{k (5) must not exceed the number of experts E (4)}}
  %i, %l, %g = vmoe.router_losses %x, %r {k = 5 : i64}
      : tensor<1x5x10xf32>, tensor<10x4xf32> -> tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
  return
}

// -----

/// router_losses-C2: k >= 1 (the attribute constraint).
func.func @negative_router_losses_k_zero(%x: tensor<1x5x10xf32>, %r: tensor<10x4xf32>) {
  // expected-error @+1 {{attribute 'k' failed to satisfy constraint}}
  %i, %l, %g = vmoe.router_losses %x, %r {k = 0 : i64}
      : tensor<1x5x10xf32>, tensor<10x4xf32> -> tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
  return
}

// -----

/// router_losses-C3: noise_std without noise.
func.func @negative_router_losses_noise_std_only(%x: tensor<1x5x10xf32>, %r: tensor<10x4xf32>) {
  // expected-error @+1 {{the 'noise' operand and the 'noise_std' attribute must be given together (got noise_std only)}}
  %i, %l, %g = vmoe.router_losses %x, %r {k = 1 : i64, noise_std = 1.0}
      : tensor<1x5x10xf32>, tensor<10x4xf32> -> tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
  return
}

// -----

/// router_losses-C3: noise without noise_std.
func.func @negative_router_losses_noise_only(%x: tensor<1x5x10xf32>, %r: tensor<10x4xf32>,
    %n: tensor<1x5x4xf32>) {
  // expected-error @+1 {{the 'noise' operand and the 'noise_std' attribute must be given together (got noise only)}}
  %i, %l, %g = vmoe.router_losses %x, %r noise(%n : tensor<1x5x4xf32>) {k = 1 : i64}
      : tensor<1x5x10xf32>, tensor<10x4xf32> -> tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
  return
}

// -----

/// router_losses-C3: noise_std > 0 (the load loss divides by it).
func.func @negative_router_losses_noise_std_zero(%x: tensor<1x5x10xf32>, %r: tensor<10x4xf32>,
    %n: tensor<1x5x4xf32>) {
  // expected-error @+1 {{noise_std must be finite and > 0, got 0}}
  %i, %l, %g = vmoe.router_losses %x, %r noise(%n : tensor<1x5x4xf32>) {k = 1 : i64, noise_std = 0.0}
      : tensor<1x5x10xf32>, tensor<10x4xf32> -> tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
  return
}

// -----

/// router_losses-C3: noise is G x S x E.
func.func @negative_router_losses_noise_shape(%x: tensor<1x5x10xf32>, %r: tensor<10x4xf32>,
    %n: tensor<1x5x3xf32>) {
  // expected-error @+1 {{'noise' must have shape 1x5x4 (G x S x E), got 1x5x3}}
  %i, %l, %g = vmoe.router_losses %x, %r noise(%n : tensor<1x5x3xf32>) {k = 1 : i64, noise_std = 1.0}
      : tensor<1x5x10xf32>, tensor<10x4xf32> -> tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
  return
}

// -----

/// router_losses-C4: one loss per group.
func.func @negative_router_losses_result_shape(%x: tensor<2x5x10xf32>, %r: tensor<10x4xf32>) {
  // expected-error @+1 {{'load' must have shape 2 (G), got 3}}
  %i, %l, %g = vmoe.router_losses %x, %r {k = 1 : i64}
      : tensor<2x5x10xf32>, tensor<10x4xf32> -> tensor<2xf32>, tensor<3xf32>, tensor<2xf32>
  return
}

// -----

/// router_losses-C4: the losses are f32.
func.func @negative_router_losses_result_type(%x: tensor<2x5x10xbf16>, %r: tensor<10x4xbf16>) {
  // expected-error @+1 {{result #0 must be ranked tensor of 32-bit float values}}
  %i, %l, %g = vmoe.router_losses %x, %r {k = 1 : i64}
      : tensor<2x5x10xbf16>, tensor<10x4xbf16> -> tensor<2xbf16>, tensor<2xf32>, tensor<2xf32>
  return
}

// -----

/// router_losses-C5: one element type for x and router.
func.func @negative_router_losses_router_type(%x: tensor<2x5x10xf32>, %r: tensor<10x4xbf16>) {
  // expected-error @+1 {{failed to verify that all of {x, router} have same element type}}
  %i, %l, %g = vmoe.router_losses %x, %r {k = 1 : i64}
      : tensor<2x5x10xf32>, tensor<10x4xbf16> -> tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
  return
}

// -----

/// router_losses-C5: noise has the element type of x.
func.func @negative_router_losses_noise_type(%x: tensor<1x5x10xf32>, %r: tensor<10x4xf32>,
    %n: tensor<1x5x4xbf16>) {
  // expected-error @+1 {{'noise' must have the element type of 'x' ('f32'), got 'bf16'}}
  %i, %l, %g = vmoe.router_losses %x, %r noise(%n : tensor<1x5x4xbf16>) {k = 1 : i64, noise_std = 1.0}
      : tensor<1x5x10xf32>, tensor<10x4xf32> -> tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
  return
}

// -----

/// expert_swiglu-C1: buffers are E x G x B x D.
func.func @negative_expert_swiglu_buffers_rank(%b: tensor<4x6x10xf32>, %wg: tensor<4x10x12xf32>,
    %wu: tensor<4x10x12xf32>, %wd: tensor<4x12x10xf32>) {
  // expected-error @+1 {{'buffers' must have rank 4 (E x G x B x D), got rank 3}}
  %y = vmoe.expert_swiglu %b, %wg, %wu, %wd
      : tensor<4x6x10xf32>, tensor<4x10x12xf32>, tensor<4x10x12xf32>, tensor<4x12x10xf32>
  return
}

// -----

/// expert_swiglu-C2: w_gate is E x D x H.
func.func @negative_expert_swiglu_w_gate(%b: tensor<4x1x6x10xf32>, %wg: tensor<4x11x12xf32>,
    %wu: tensor<4x10x12xf32>, %wd: tensor<4x12x10xf32>) {
  // expected-error @+1 {{'w_gate' must have shape 4x10x? (E x D x H), got 4x11x12}}
  %y = vmoe.expert_swiglu %b, %wg, %wu, %wd
      : tensor<4x1x6x10xf32>, tensor<4x11x12xf32>, tensor<4x10x12xf32>, tensor<4x12x10xf32>
  return
}

// -----

/// expert_swiglu-C2: w_up has the shape of w_gate.
func.func @negative_expert_swiglu_w_up(%b: tensor<4x1x6x10xf32>, %wg: tensor<4x10x12xf32>,
    %wu: tensor<4x10x16xf32>, %wd: tensor<4x12x10xf32>) {
  // expected-error @+1 {{'w_up' must have shape 4x10x12 (E x D x H), got 4x10x16}}
  %y = vmoe.expert_swiglu %b, %wg, %wu, %wd
      : tensor<4x1x6x10xf32>, tensor<4x10x12xf32>, tensor<4x10x16xf32>, tensor<4x12x10xf32>
  return
}

// -----

/// expert_swiglu-C3: w_down is E x H x D.
func.func @negative_expert_swiglu_w_down(%b: tensor<4x1x6x10xf32>, %wg: tensor<4x10x12xf32>,
    %wu: tensor<4x10x12xf32>, %wd: tensor<3x12x10xf32>) {
  // expected-error @+1 {{'w_down' must have shape 4x12x10 (E x H x D), got 3x12x10}}
  %y = vmoe.expert_swiglu %b, %wg, %wu, %wd
      : tensor<4x1x6x10xf32>, tensor<4x10x12xf32>, tensor<4x10x12xf32>, tensor<3x12x10xf32>
  return
}

// -----

/// expert_swiglu-C1: the output has the type of the buffers.
func.func @negative_expert_swiglu_output(%b: tensor<4x1x6x10xf32>, %wg: tensor<4x10x12xf32>,
    %wu: tensor<4x10x12xf32>, %wd: tensor<4x12x10xf32>) {
  // expected-error @+1 {{failed to verify that all of {buffers, output} have same type}}
  %y = "vmoe.expert_swiglu"(%b, %wg, %wu, %wd)
      : (tensor<4x1x6x10xf32>, tensor<4x10x12xf32>, tensor<4x10x12xf32>, tensor<4x12x10xf32>)
      -> tensor<4x1x7x10xf32>
  return
}

// -----

/// expert_swiglu-C4: one element type.
func.func @negative_expert_swiglu_types(%b: tensor<4x1x6x10xf32>, %wg: tensor<4x10x12xbf16>,
    %wu: tensor<4x10x12xf32>, %wd: tensor<4x12x10xf32>) {
  // expected-error @+1 {{failed to verify that all of {buffers, w_gate, w_up, w_down} have same element type}}
  %y = vmoe.expert_swiglu %b, %wg, %wu, %wd
      : tensor<4x1x6x10xf32>, tensor<4x10x12xbf16>, tensor<4x10x12xf32>, tensor<4x12x10xf32>
  return
}

// -----

/// fused_experts-C6: w_up is E x D x H, the shape of w1.
func.func @negative_fused_experts_w_up_shape(%x: tensor<1x16x8xf32>, %s: tensor<1x16x2xi32>, %w: tensor<1x16x2xf32>,
    %e: tensor<4x1x16xi32>, %f: tensor<4x1xi32>, %wg: tensor<4x8x12xf32>, %b1: tensor<4x12xf32>,
    %wd: tensor<4x12x8xf32>, %b2: tensor<4x8xf32>, %wu: tensor<4x8x10xf32>) {
  // expected-error @+1 {{'w_up' must have shape 4x8x12 (E x D x H), got 4x8x10}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %wg, %b1, %wd, %b2 gated(%wu : tensor<4x8x10xf32>)
      : tensor<1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>, tensor<4x1x16xi32>, tensor<4x1xi32>,
        tensor<4x8x12xf32>, tensor<4x12xf32>, tensor<4x12x8xf32>, tensor<4x8xf32>
  return
}

// -----

/// fused_experts-C6: w_up has the element type of x.
func.func @negative_fused_experts_w_up_type(%x: tensor<1x16x8xf32>, %s: tensor<1x16x2xi32>, %w: tensor<1x16x2xf32>,
    %e: tensor<4x1x16xi32>, %f: tensor<4x1xi32>, %wg: tensor<4x8x12xf32>, %b1: tensor<4x12xf32>,
    %wd: tensor<4x12x8xf32>, %b2: tensor<4x8xf32>, %wu: tensor<4x8x12xbf16>) {
  // expected-error @+1 {{'w_up' must have the element type of 'x' ('f32'), got 'bf16'}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %wg, %b1, %wd, %b2 gated(%wu : tensor<4x8x12xbf16>)
      : tensor<1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>, tensor<4x1x16xi32>, tensor<4x1xi32>,
        tensor<4x8x12xf32>, tensor<4x12xf32>, tensor<4x12x8xf32>, tensor<4x8xf32>
  return
}
