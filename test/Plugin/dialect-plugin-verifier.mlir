// RUN: mlir-opt %s --load-dialect-plugin=%vmoe_plugin -verify-diagnostics

// The plugin brings the vmoe verifiers along.
func.func @negative_dispatch_capacity_mismatch(%x: tensor<1x16x8xf32>, %ids: tensor<1x16x2xi32>) {
  // expected-error @+1 {{'buffers' dim 2 (4) must equal capacity (8)}}
  %b, %s = vmoe.dispatch %x, %ids {capacity = 8 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32> -> tensor<4x1x4x8xf32>, tensor<1x16x2xi32>
  return
}
