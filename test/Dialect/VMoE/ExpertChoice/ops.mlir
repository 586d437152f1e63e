// RUN: vmoe-opt %s -split-input-file | vmoe-opt -split-input-file | FileCheck %s
// RUN: vmoe-opt %s -split-input-file --mlir-print-op-generic | vmoe-opt -split-input-file | FileCheck %s

// Round trip of the expert choice ops in their custom and generic forms.

// CHECK-LABEL: func.func @expert_choice_runtime_capacity
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = vmoe.expert_choice %{{.*}}, %{{.*}} capacity(%{{.*}})
// CHECK-SAME: : tensor<2x400x512xf32>, tensor<512x32xf32> -> tensor<2x400x32xf32>, tensor<32x2x25xi32>, tensor<2x400x32xi32>
func.func @expert_choice_runtime_capacity(%x: tensor<2x400x512xf32>, %r: tensor<512x32xf32>, %b: index)
    -> (tensor<2x400x32xf32>, tensor<32x2x25xi32>, tensor<2x400x32xi32>) {
  %gates, %tokens, %slots = vmoe.expert_choice %x, %r capacity(%b)
      : tensor<2x400x512xf32>, tensor<512x32xf32>
      -> tensor<2x400x32xf32>, tensor<32x2x25xi32>, tensor<2x400x32xi32>
  return %gates, %tokens, %slots : tensor<2x400x32xf32>, tensor<32x2x25xi32>, tensor<2x400x32xi32>
}

// -----

// CHECK-LABEL: func.func @expert_choice_dynamic_tokens
// CHECK: vmoe.expert_choice %{{.*}}, %{{.*}} :
// CHECK-SAME: tensor<?x?x16xf32>, tensor<16x4xf32> -> tensor<?x?x4xf32>, tensor<4x?x3xi32>, tensor<?x?x4xi32>
func.func @expert_choice_dynamic_tokens(%x: tensor<?x?x16xf32>, %r: tensor<16x4xf32>) -> tensor<4x?x3xi32> {
  %gates, %tokens, %slots = vmoe.expert_choice %x, %r
      : tensor<?x?x16xf32>, tensor<16x4xf32>
      -> tensor<?x?x4xf32>, tensor<4x?x3xi32>, tensor<?x?x4xi32>
  return %tokens : tensor<4x?x3xi32>
}

// -----

// CHECK-LABEL: func.func @expert_choice_experts
// CHECK: vmoe.expert_choice_experts %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {activation = #vmoe.activation<relu>}
// CHECK-SAME: : tensor<2x400x512xf32>, tensor<2x400x32xf32>, tensor<32x2x25xi32>, tensor<2x400x32xi32>, tensor<32x512x2048xf32>, tensor<32x2048xf32>, tensor<32x2048x512xf32>, tensor<32x512xf32>
func.func @expert_choice_experts(%x: tensor<2x400x512xf32>, %g: tensor<2x400x32xf32>, %t: tensor<32x2x25xi32>,
    %s: tensor<2x400x32xi32>, %w1: tensor<32x512x2048xf32>, %b1: tensor<32x2048xf32>,
    %w2: tensor<32x2048x512xf32>, %b2: tensor<32x512xf32>) -> tensor<2x400x512xf32> {
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<relu>}
      : tensor<2x400x512xf32>, tensor<2x400x32xf32>, tensor<32x2x25xi32>, tensor<2x400x32xi32>,
        tensor<32x512x2048xf32>, tensor<32x2048xf32>, tensor<32x2048x512xf32>, tensor<32x512xf32>
  return %o : tensor<2x400x512xf32>
}

// -----

// CHECK-LABEL: func.func @expert_choice_layer
// CHECK: %[[GATES:.*]], %[[TOKENS:.*]], %[[SLOTS:.*]] = vmoe.expert_choice
// CHECK: vmoe.expert_choice_experts %{{.*}}, %[[GATES]], %[[TOKENS]], %[[SLOTS]],
// CHECK-NOT: activation
func.func @expert_choice_layer(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
    %b1: tensor<4x32xf32>, %w2: tensor<4x32x16xf32>, %b2: tensor<4x16xf32>) -> tensor<1x8x16xf32> {
  %gates, %tokens, %slots = vmoe.expert_choice %x, %r
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>
  %o = vmoe.expert_choice_experts %x, %gates, %tokens, %slots, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return %o : tensor<1x8x16xf32>
}

// -----

// CHECK-LABEL: func.func @expert_choice_valid
// CHECK: vmoe.expert_choice %{{.*}}, %{{.*}} capacity(%{{.*}}) valid(%{{.*}}) :
// CHECK: vmoe.expert_choice %{{.*}}, %{{.*}} valid(%{{.*}}) :
func.func @expert_choice_valid(%x: tensor<2x8x16xf32>, %r: tensor<16x4xf32>, %b: index, %n: index)
    -> (tensor<4x2x3xi32>, tensor<4x2x3xi32>) {
  %g1, %t1, %s1 = vmoe.expert_choice %x, %r capacity(%b) valid(%n)
      : tensor<2x8x16xf32>, tensor<16x4xf32>
      -> tensor<2x8x4xf32>, tensor<4x2x3xi32>, tensor<2x8x4xi32>
  %g2, %t2, %s2 = vmoe.expert_choice %x, %r valid(%n)
      : tensor<2x8x16xf32>, tensor<16x4xf32>
      -> tensor<2x8x4xf32>, tensor<4x2x3xi32>, tensor<2x8x4xi32>
  return %t1, %t2 : tensor<4x2x3xi32>, tensor<4x2x3xi32>
}

// -----

/// expert_choice_experts with weights in panel layout (the example of the
/// op description): w1 E x ceil(H/L) x D x L, w2 E x ceil(D/L) x H x L.
// CHECK-LABEL: func.func @expert_choice_experts_weight_panels
// CHECK: vmoe.expert_choice_experts %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {weight_panels = 16 : i64}
// CHECK-SAME: tensor<32x128x512x16xf32>, tensor<32x2048xf32>, tensor<32x32x2048x16xf32>, tensor<32x512xf32>
func.func @expert_choice_experts_weight_panels(%x: tensor<2x400x512xf32>, %gates: tensor<2x400x32xf32>,
    %tokens: tensor<32x2x25xi32>, %slots: tensor<2x400x32xi32>, %w1p: tensor<32x128x512x16xf32>,
    %b1: tensor<32x2048xf32>, %w2p: tensor<32x32x2048x16xf32>, %b2: tensor<32x512xf32>) -> tensor<2x400x512xf32> {
  %packed = vmoe.expert_choice_experts %x, %gates, %tokens, %slots,
                                       %w1p, %b1, %w2p, %b2
      {weight_panels = 16 : i64}
      : tensor<2x400x512xf32>, tensor<2x400x32xf32>, tensor<32x2x25xi32>,
        tensor<2x400x32xi32>, tensor<32x128x512x16xf32>,
        tensor<32x2048xf32>, tensor<32x32x2048x16xf32>, tensor<32x512xf32>
  return %packed : tensor<2x400x512xf32>
}

// -----

/// A last panel zero-padded past H (H = 24, two panels of 16).
// CHECK-LABEL: func.func @expert_choice_experts_weight_panels_partial
// CHECK: vmoe.expert_choice_experts {{.*}}weight_panels = 16 : i64
// CHECK-SAME: tensor<4x2x16x16xf32>, tensor<4x24xf32>, tensor<4x1x24x16xf32>, tensor<4x16xf32>
func.func @expert_choice_experts_weight_panels_partial(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf32>,
    %t: tensor<4x1x2xi32>, %s: tensor<1x8x4xi32>, %w1p: tensor<4x2x16x16xf32>, %b1: tensor<4x24xf32>,
    %w2p: tensor<4x1x24x16xf32>, %b2: tensor<4x16xf32>) -> tensor<1x8x16xf32> {
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1p, %b1, %w2p, %b2 {weight_panels = 16 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x2x16x16xf32>, tensor<4x24xf32>, tensor<4x1x24x16xf32>, tensor<4x16xf32>
  return %o : tensor<1x8x16xf32>
}
