// RUN: vmoe-opt %s -split-input-file -verify-diagnostics

// The rules of bf16 pair panels (docs/Dialect.md): unpack_panels-C3,
// fused_experts-C5 with bf16_pairs, fused_experts-C7.

/// unpack_panels-C3: the panels hold ceil(K/2) rows of pairs.
func.func @negative_unpack_panels_bf16_k(%p: tensor<4x2x8x16xf32>) -> tensor<4x8x32xf32> {
  // expected-error @+1 {{panels dim K (8) must be ceil(K/2) = 4 for the result's K (8) with bf16_pairs storage}}
  %w = vmoe.unpack_panels %p {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<4x2x8x16xf32> -> tensor<4x8x32xf32>
  return %w : tensor<4x8x32xf32>
}

// -----

/// unpack_panels-C3: the pairs live in 32-bit (f32) words.
func.func @negative_unpack_panels_bf16_f16(%p: tensor<2x4x16xf16>) -> tensor<8x32xf16> {
  // expected-error @+1 {{bf16_pairs storage needs f32 panels and result, got 'f16'}}
  %w = vmoe.unpack_panels %p {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<2x4x16xf16> -> tensor<8x32xf16>
  return %w : tensor<8x32xf16>
}

// -----

/// Unknown storages fail to parse.
func.func @negative_unpack_panels_storage_unknown(%p: tensor<2x4x16xf32>) -> tensor<8x32xf32> {
  // expected-error @+2 {{expected ::mlir::vmoe::PanelStorage to be one of: f32, bf16_pairs}}
  // expected-error @+1 {{failed to parse VMoE_PanelStorageAttr parameter 'value'}}
  %w = vmoe.unpack_panels %p {storage = #vmoe.panel_storage<f16_pairs>} : tensor<2x4x16xf32> -> tensor<8x32xf32>
  return %w : tensor<8x32xf32>
}

// -----

/// fused_experts-C5 with bf16_pairs: w1 is E x ceil(H/L) x ceil(D/2) x L.
func.func @negative_fused_experts_bf16_w1(%x: tensor<1x8x32xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x4xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x4x32x16xf32>, %b1: tensor<4x64xf32>,
    %w2: tensor<4x2x32x16xf32>, %b2: tensor<4x32xf32>) -> tensor<1x8x32xf32> {
  // expected-error @+1 {{'w1' must have shape 4x4x16x16 (E x ceil(H/L) x ceil(D/2) x L), got 4x4x32x16}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      {weight_panels = 16 : i64, weight_storage = #vmoe.panel_storage<bf16_pairs>}
      : tensor<1x8x32xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x4xi32>, tensor<4x1xi32>,
        tensor<4x4x32x16xf32>, tensor<4x64xf32>, tensor<4x2x32x16xf32>, tensor<4x32xf32>
  return %o : tensor<1x8x32xf32>
}

// -----

/// fused_experts-C5 with bf16_pairs: w2 is E x ceil(D/L) x ceil(H/2) x L.
func.func @negative_fused_experts_bf16_w2(%x: tensor<1x8x32xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x4xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x4x16x16xf32>, %b1: tensor<4x64xf32>,
    %w2: tensor<4x2x64x16xf32>, %b2: tensor<4x32xf32>) -> tensor<1x8x32xf32> {
  // expected-error @+1 {{'w2' must have shape 4x2x32x16 (E x ceil(D/L) x ceil(H/2) x L), got 4x2x64x16}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      {weight_panels = 16 : i64, weight_storage = #vmoe.panel_storage<bf16_pairs>}
      : tensor<1x8x32xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x4xi32>, tensor<4x1xi32>,
        tensor<4x4x16x16xf32>, tensor<4x64xf32>, tensor<4x2x64x16xf32>, tensor<4x32xf32>
  return %o : tensor<1x8x32xf32>
}

// -----

/// fused_experts-C7: bf16 pairs only in panels.
func.func @negative_fused_experts_bf16_no_panels(%x: tensor<1x8x32xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x4xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x32x64xf32>, %b1: tensor<4x64xf32>,
    %w2: tensor<4x64x32xf32>, %b2: tensor<4x32xf32>) -> tensor<1x8x32xf32> {
  // expected-error @+1 {{'weight_storage' bf16_pairs needs 'weight_panels'}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      {weight_storage = #vmoe.panel_storage<bf16_pairs>}
      : tensor<1x8x32xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x4xi32>, tensor<4x1xi32>,
        tensor<4x32x64xf32>, tensor<4x64xf32>, tensor<4x64x32xf32>, tensor<4x32xf32>
  return %o : tensor<1x8x32xf32>
}

// -----

/// fused_experts-C7: the pairs live in f32 words, the operands are f32.
func.func @negative_fused_experts_bf16_f16(%x: tensor<1x8x32xf16>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf16>,
    %e: tensor<4x1x4xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x4x16x16xf16>, %b1: tensor<4x64xf16>,
    %w2: tensor<4x2x32x16xf16>, %b2: tensor<4x32xf16>) -> tensor<1x8x32xf16> {
  // expected-error @+1 {{'weight_storage' bf16_pairs needs f32 operands, got 'f16'}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      {weight_panels = 16 : i64, weight_storage = #vmoe.panel_storage<bf16_pairs>}
      : tensor<1x8x32xf16>, tensor<1x8x2xi32>, tensor<1x8x2xf16>, tensor<4x1x4xi32>, tensor<4x1xi32>,
        tensor<4x4x16x16xf16>, tensor<4x64xf16>, tensor<4x2x32x16xf16>, tensor<4x32xf16>
  return %o : tensor<1x8x32xf16>
}
