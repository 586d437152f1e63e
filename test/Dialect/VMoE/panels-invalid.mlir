// RUN: vmoe-opt %s -split-input-file -verify-diagnostics

// The rules of the GEMM panel layout (docs/Dialect.md): unpack_panels-C1,
// unpack_panels-C2, fused_experts-C5.

/// unpack_panels-C1: panels are ... x P x K x L.
func.func @negative_unpack_panels_rank(%p: tensor<8x16xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'panels' must have rank >= 3 (... x P x K x L), got rank 2}}
  %w = vmoe.unpack_panels %p : tensor<8x16xf32> -> tensor<8xf32>
  return %w : tensor<8xf32>
}

// -----

/// unpack_panels-C1: the result drops one dim.
func.func @negative_unpack_panels_result_rank(%p: tensor<2x8x16xf32>) -> tensor<1x8x32xf32> {
  // expected-error @+1 {{result must have rank 2 (... x K x N), got rank 3}}
  %w = vmoe.unpack_panels %p : tensor<2x8x16xf32> -> tensor<1x8x32xf32>
  return %w : tensor<1x8x32xf32>
}

// -----

/// unpack_panels-C1: leading dims and K carry over.
func.func @negative_unpack_panels_k(%p: tensor<4x2x8x16xf32>) -> tensor<4x9x32xf32> {
  // expected-error @+1 {{result must have shape 4x8x32 (... x K x N), got 4x9x32}}
  %w = vmoe.unpack_panels %p : tensor<4x2x8x16xf32> -> tensor<4x9x32xf32>
  return %w : tensor<4x9x32xf32>
}

// -----

/// unpack_panels-C2: N needs exactly P panels.
func.func @negative_unpack_panels_count(%p: tensor<3x8x16xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{result dim N (32) must need exactly 3 panels of width 16, i.e. lie in (32, 48]}}
  %w = vmoe.unpack_panels %p : tensor<3x8x16xf32> -> tensor<8x32xf32>
  return %w : tensor<8x32xf32>
}

// -----

/// fused_experts-C5: w1 is E x ceil(H/L) x D x L with H of b1.
func.func @negative_fused_experts_panels_w1(%x: tensor<1x8x32xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x4xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x32x64xf32>, %b1: tensor<4x64xf32>,
    %w2: tensor<4x2x64x16xf32>, %b2: tensor<4x32xf32>) -> tensor<1x8x32xf32> {
  // expected-error @+1 {{'w1' must have rank 4 (E x ceil(H/L) x D x L), got rank 3}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2 {weight_panels = 16 : i64}
      : tensor<1x8x32xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x4xi32>, tensor<4x1xi32>,
        tensor<4x32x64xf32>, tensor<4x64xf32>, tensor<4x2x64x16xf32>, tensor<4x32xf32>
  return %o : tensor<1x8x32xf32>
}

// -----

/// fused_experts-C5: w2 is E x ceil(D/L) x H x L.
func.func @negative_fused_experts_panels_w2(%x: tensor<1x8x32xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x4xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x4x32x16xf32>, %b1: tensor<4x64xf32>,
    %w2: tensor<4x2x64x8xf32>, %b2: tensor<4x32xf32>) -> tensor<1x8x32xf32> {
  // expected-error @+1 {{'w2' must have shape 4x2x64x16 (E x ceil(D/L) x H x L), got 4x2x64x8}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2 {weight_panels = 16 : i64}
      : tensor<1x8x32xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x4xi32>, tensor<4x1xi32>,
        tensor<4x4x32x16xf32>, tensor<4x64xf32>, tensor<4x2x64x8xf32>, tensor<4x32xf32>
  return %o : tensor<1x8x32xf32>
}

// -----

/// The panel width is positive.
func.func @negative_fused_experts_panels_zero(%x: tensor<1x8x32xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x4xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x32x64xf32>, %b1: tensor<4x64xf32>,
    %w2: tensor<4x64x32xf32>, %b2: tensor<4x32xf32>) -> tensor<1x8x32xf32> {
  // expected-error @+1 {{attribute 'weight_panels' failed to satisfy constraint}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2 {weight_panels = 0 : i64}
      : tensor<1x8x32xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x4xi32>, tensor<4x1xi32>,
        tensor<4x32x64xf32>, tensor<4x64xf32>, tensor<4x64x32xf32>, tensor<4x32xf32>
  return %o : tensor<1x8x32xf32>
}
