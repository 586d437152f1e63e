// RUN: vmoe-opt %s -vmoe-buffer-sizing="capacity-ratio=0.01" -verify-diagnostics

/// The pass option gives a ratio whose capacity rounds to 0.
func.func @negative_rounds_to_zero(%x: tensor<1x400x8xf32>, %ids: tensor<1x400x2xi32>) -> tensor<1x400x2xi32> {
  // expected-error @+1 {{capacity rounds to 0 (k*S*C/E = 2*400*0.01/32 = 0.25); raise the capacity ratio}}
  %buf, %slots = vmoe.dispatch %x, %ids {capacity_ratio = 1.0 : f64}
      : tensor<1x400x8xf32>, tensor<1x400x2xi32> -> tensor<32x1x?x8xf32>, tensor<1x400x2xi32>
  return %slots : tensor<1x400x2xi32>
}
