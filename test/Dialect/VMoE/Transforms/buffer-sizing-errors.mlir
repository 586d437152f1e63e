// RUN: vmoe-opt %s -split-input-file -vmoe-buffer-sizing -verify-diagnostics

/// Nothing to size from: S is dynamic.
func.func @negative_dynamic_tokens(%x: tensor<1x?x8xf32>, %ids: tensor<1x?x2xi32>) -> tensor<1x?x2xi32> {
  // expected-error @+1 {{cannot size the buffers: 'x' dim 1 (tokens per group) is dynamic}}
  %buf, %slots = vmoe.dispatch %x, %ids {capacity_ratio = 1.0 : f64}
      : tensor<1x?x8xf32>, tensor<1x?x2xi32> -> tensor<4x1x?x8xf32>, tensor<1x?x2xi32>
  return %slots : tensor<1x?x2xi32>
}
