// RUN: vmoe-opt %s -split-input-file -verify-diagnostics

/// expert_shard-C1: E divisible by ranks.
func.func @negative_shard_not_divisible(%w: tensor<6x4x8xf32>) -> tensor<1x4x8xf32> {
  // expected-error @+1 {{experts has 6 experts, not divisible by ranks (4)}}
  %s = vmoe.expert_shard %w {ranks = 4 : i64} : tensor<6x4x8xf32> -> tensor<1x4x8xf32>
  return %s : tensor<1x4x8xf32>
}

// -----

/// expert_shard-C1: E static.
func.func @negative_shard_dynamic_experts(%w: tensor<?x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{experts dim 0 (experts) must be static}}
  %s = vmoe.expert_shard %w {ranks = 2 : i64} : tensor<?x4xf32> -> tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// -----

/// expert_shard-C1: rank >= 1.
func.func @negative_shard_scalar(%w: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{experts must have rank >= 1}}
  %s = vmoe.expert_shard %w {ranks = 2 : i64} : tensor<f32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

/// expert_shard-C2: the shard is E / ranks x the other dims.
func.func @negative_shard_shape(%w: tensor<8x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{shard must be 4x4, got 2x4}}
  %s = vmoe.expert_shard %w {ranks = 2 : i64} : tensor<8x4xf32> -> tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// -----

/// ranks is positive (ODS constraint).
func.func @negative_shard_zero_ranks(%w: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{attribute 'ranks' failed to satisfy constraint}}
  %s = vmoe.expert_shard %w {ranks = 0 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

/// exchange-C1: the token side is E x G x B x D.
func.func @negative_exchange_rank(%b: tensor<8x4x10xf32>, %ids: tensor<1x8x2xi32>) -> tensor<4x2x4x10xf32> {
  // expected-error @+1 {{input must have rank 4, got 3}}
  %r = vmoe.exchange_dispatch %b, %ids, %ids {layer = 0 : i64, ranks = 2 : i64}
      : tensor<8x4x10xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32> -> tensor<4x2x4x10xf32>
  return %r : tensor<4x2x4x10xf32>
}

// -----

/// exchange-C1: E divisible by ranks.
func.func @negative_exchange_not_divisible(%b: tensor<6x1x4x10xf32>, %ids: tensor<1x8x2xi32>) -> tensor<1x4x4x10xf32> {
  // expected-error @+1 {{input has 6 experts, not divisible by ranks (4)}}
  %r = vmoe.exchange_dispatch %b, %ids, %ids {layer = 0 : i64, ranks = 4 : i64}
      : tensor<6x1x4x10xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32> -> tensor<1x4x4x10xf32>
  return %r : tensor<1x4x4x10xf32>
}

// -----

/// exchange-C2: expert_ids G x S x k.
func.func @negative_exchange_ids_rank(%b: tensor<8x1x4x10xf32>, %ids: tensor<8x2xi32>) -> tensor<4x2x4x10xf32> {
  // expected-error @+1 {{expert_ids must be G x S x k, got 8x2}}
  %r = vmoe.exchange_dispatch %b, %ids, %ids {layer = 0 : i64, ranks = 2 : i64}
      : tensor<8x1x4x10xf32>, tensor<8x2xi32>, tensor<8x2xi32> -> tensor<4x2x4x10xf32>
  return %r : tensor<4x2x4x10xf32>
}

// -----

/// exchange-C2: slots have the shape of expert_ids.
func.func @negative_exchange_slots_shape(%b: tensor<8x1x4x10xf32>, %ids: tensor<1x8x2xi32>,
                                         %slots: tensor<1x8x1xi32>) -> tensor<4x2x4x10xf32> {
  // expected-error @+1 {{slots must have the shape of expert_ids (1x8x2), got 1x8x1}}
  %r = vmoe.exchange_dispatch %b, %ids, %slots {layer = 0 : i64, ranks = 2 : i64}
      : tensor<8x1x4x10xf32>, tensor<1x8x2xi32>, tensor<1x8x1xi32> -> tensor<4x2x4x10xf32>
  return %r : tensor<4x2x4x10xf32>
}

// -----

/// exchange-C2: G of the routing equals G of the token side.
func.func @negative_exchange_groups(%b: tensor<8x1x4x10xf32>, %ids: tensor<2x8x2xi32>) -> tensor<4x2x4x10xf32> {
  // expected-error @+1 {{expert_ids dim 0 (2) must equal the groups of input (1)}}
  %r = vmoe.exchange_dispatch %b, %ids, %ids {layer = 0 : i64, ranks = 2 : i64}
      : tensor<8x1x4x10xf32>, tensor<2x8x2xi32>, tensor<2x8x2xi32> -> tensor<4x2x4x10xf32>
  return %r : tensor<4x2x4x10xf32>
}

// -----

/// exchange-C3: the expert side is E / ranks x ranks * G x B x D.
func.func @negative_exchange_dispatch_output(%b: tensor<8x1x4x10xf32>, %ids: tensor<1x8x2xi32>) -> tensor<4x1x4x10xf32> {
  // expected-error @+1 {{output must be 4x2x4x10 (E / ranks x ranks * G x B x D), got 4x1x4x10}}
  %r = vmoe.exchange_dispatch %b, %ids, %ids {layer = 0 : i64, ranks = 2 : i64}
      : tensor<8x1x4x10xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32> -> tensor<4x1x4x10xf32>
  return %r : tensor<4x1x4x10xf32>
}

// -----

/// exchange-C3 for exchange_combine: its input is the expert side.
func.func @negative_exchange_combine_input(%y: tensor<8x1x4x10xf32>, %ids: tensor<1x8x2xi32>) -> tensor<8x1x4x10xf32> {
  // expected-error @+1 {{input must be 4x2x4x10 (E / ranks x ranks * G x B x D), got 8x1x4x10}}
  %r = vmoe.exchange_combine %y, %ids, %ids {layer = 0 : i64, ranks = 2 : i64}
      : tensor<8x1x4x10xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32> -> tensor<8x1x4x10xf32>
  return %r : tensor<8x1x4x10xf32>
}
