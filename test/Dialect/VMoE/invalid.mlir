// RUN: vmoe-opt %s -split-input-file -verify-diagnostics

// One case per verifier rule of docs/Dialect.md; the rule ID leads each case.

/// route-C1: x is G x S x D.
func.func @negative_route_x_rank(%x: tensor<8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{'x' must have rank 3 (G x S x D), got rank 2}}
  %g, %i, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  return
}

// -----

/// route-C2: the router is D x E.
func.func @negative_route_router_rank(%x: tensor<1x8x16xf32>, %r: tensor<1x16x4xf32>) {
  // expected-error @+1 {{'router' must have rank 2 (D x E), got rank 3}}
  %g, %i, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<1x16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  return
}

// -----

/// route-C2: router dim 0 is the model width of x.
func.func @negative_route_router_width(%x: tensor<1x8x16xf32>, %r: tensor<8x4xf32>) {
  // expected-error @+1 {{'router' dim 0 (8) must equal the model width D of 'x' (16)}}
  %g, %i, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<8x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  return
}

// -----

/// route-C3: k <= E.
func.func @negative_route_k_above_experts(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{k (5) must not exceed the number of experts E (4)}}
  %g, %i, %w = vmoe.route %x, %r {k = 5 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x5xi32>, tensor<1x8x5xf32>
  return
}

// -----

/// route-C3: k >= 1.
func.func @negative_route_k_zero(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{attribute 'k' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %g, %i, %w = vmoe.route %x, %r {k = 0 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x0xi32>, tensor<1x8x0xf32>
  return
}

// -----

/// route-C4: gates are G x S x E.
func.func @negative_route_gates_shape(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{'gates' must have shape 1x8x4 (G x S x E), got 1x8x3}}
  %g, %i, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x3xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  return
}

// -----

/// route-C5: expert ids are G x S x k.
func.func @negative_route_ids_shape(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{'expert_ids' must have shape 1x8x2 (G x S x k), got 1x8x1}}
  %g, %i, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x1xi32>, tensor<1x8x2xf32>
  return
}

// -----

/// route-C5: weights are G x S x k.
func.func @negative_route_weights_shape(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{'weights' must have shape 1x8x2 (G x S x k), got 2x8x2}}
  %g, %i, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<2x8x2xf32>
  return
}

// -----

/// route-C6: one float element type.
func.func @negative_route_mixed_floats(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf16>) {
  // expected-error @+1 {{failed to verify that all of {x, router, gates, weights} have same element type}}
  %g, %i, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf16> -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  return
}

// -----

/// route-C7: expert ids are i32.
func.func @negative_route_float_ids(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{result #1 must be ranked tensor of 32-bit signless integer values, but got 'tensor<1x8x2xf32>'}}
  %g, %i, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x2xf32>, tensor<1x8x2xf32>
  return
}

// -----

/// route-C8: noise needs noise_std.
func.func @negative_route_noise_without_std(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>, %n: tensor<1x8x4xf32>) {
  // expected-error @+1 {{the 'noise' operand and the 'noise_std' attribute must be given together (got noise only)}}
  %g, %i, %w = vmoe.route %x, %r noise(%n : tensor<1x8x4xf32>) {k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  return
}

// -----

/// route-C8: noise_std needs noise samples.
func.func @negative_route_std_without_noise(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{the 'noise' operand and the 'noise_std' attribute must be given together (got noise_std only)}}
  %g, %i, %w = vmoe.route %x, %r {k = 2 : i64, noise_std = 1.0 : f64}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  return
}

// -----

/// route-C8: noise_std >= 0.
func.func @negative_route_negative_std(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>, %n: tensor<1x8x4xf32>) {
  // expected-error @+1 {{noise_std must be finite and >= 0, got -1}}
  %g, %i, %w = vmoe.route %x, %r noise(%n : tensor<1x8x4xf32>) {k = 2 : i64, noise_std = -1.0 : f64}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  return
}

// -----

/// route-C8: noise has the shape of the gates.
func.func @negative_route_noise_shape(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>, %n: tensor<1x8x2xf32>) {
  // expected-error @+1 {{'noise' must have shape 1x8x4 (G x S x E), got 1x8x2}}
  %g, %i, %w = vmoe.route %x, %r noise(%n : tensor<1x8x2xf32>) {k = 2 : i64, noise_std = 1.0 : f64}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  return
}

// -----

/// Unknown enum values are parse errors.
func.func @negative_route_unknown_order(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+2 {{expected ::mlir::vmoe::RouteOrder to be one of: softmax_topk, topk_softmax}}
  // expected-error @+1 {{failed to parse VMoE_RouteOrderAttr parameter 'value' which is to be a `::mlir::vmoe::RouteOrder`}}
  %g, %i, %w = vmoe.route %x, %r {k = 2 : i64, order = #vmoe.route_order<topk_first>}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  return
}

// -----

/// bpr_sort-C1: the input is G x S x N.
func.func @negative_bpr_sort_rank(%g: tensor<8x4xf32>) {
  // expected-error @+1 {{'gates' must have rank 3 (G x S x N), got rank 2}}
  %o = vmoe.bpr_sort %g : tensor<8x4xf32> -> tensor<1x8xi32>
  return
}

// -----

/// bpr_sort-C2: the order is G x S.
func.func @negative_bpr_sort_order_shape(%g: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'order' must have shape 2x8 (G x S), got 2x4}}
  %o = vmoe.bpr_sort %g : tensor<2x8x4xf32> -> tensor<2x4xi32>
  return
}

// -----

/// bpr_sort-C2: the order is an i32 permutation.
func.func @negative_bpr_sort_order_type(%g: tensor<2x8x4xf32>) {
  // expected-error @+1 {{result #0 must be ranked tensor of 32-bit signless integer values, but got 'tensor<2x8xi64>'}}
  %o = vmoe.bpr_sort %g : tensor<2x8x4xf32> -> tensor<2x8xi64>
  return
}

// -----

/// bpr_sort-C3: 1 <= k <= N.
func.func @negative_bpr_sort_k_above_n(%g: tensor<2x8x4xf32>) {
  // expected-error @+1 {{k (5) must be in [1, 4] (gates dim 2)}}
  %o = vmoe.bpr_sort %g {score = #vmoe.priority_score<sum_topk>, k = 5 : i64}
      : tensor<2x8x4xf32> -> tensor<2x8xi32>
  return
}

// -----

/// bpr_sort-C3: 1 <= k <= N.
func.func @negative_bpr_sort_k_zero(%g: tensor<2x8x4xf32>) {
  // expected-error @+1 {{k (0) must be in [1, 4] (gates dim 2)}}
  %o = vmoe.bpr_sort %g {score = #vmoe.priority_score<sum_topk>, k = 0 : i64}
      : tensor<2x8x4xf32> -> tensor<2x8xi32>
  return
}

// -----

/// bpr_sort-C4: k only with sum_topk.
func.func @negative_bpr_sort_k_with_max(%g: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'k' is only used by score sum_topk, got score max}}
  %o = vmoe.bpr_sort %g {k = 2 : i64} : tensor<2x8x4xf32> -> tensor<2x8xi32>
  return
}

// -----

/// Unknown priority scores are parse errors.
func.func @negative_bpr_sort_unknown_score(%g: tensor<2x8x4xf32>) {
  // expected-error @+2 {{expected ::mlir::vmoe::PriorityScore to be one of: max, sum_topk}}
  // expected-error @+1 {{failed to parse VMoE_PriorityScoreAttr parameter 'value' which is to be a `::mlir::vmoe::PriorityScore`}}
  %o = vmoe.bpr_sort %g {score = #vmoe.priority_score<mean>} : tensor<2x8x4xf32> -> tensor<2x8xi32>
  return
}

// -----

/// capacity-C1: k <= num_experts.
func.func @negative_capacity_k_above_experts(%c: f64) {
  // expected-error @+1 {{k (3) must not exceed num_experts (2)}}
  %b = vmoe.capacity %c {k = 3 : i64, num_experts = 2 : i64, tokens_per_group = 8 : i64,
                         max_capacity = 4 : i64} : f64
  return
}

// -----

/// capacity: the static maximum is positive.
func.func @negative_capacity_zero_max(%c: f64) {
  // expected-error @+1 {{attribute 'max_capacity' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %b = vmoe.capacity %c {k = 1 : i64, num_experts = 2 : i64, tokens_per_group = 8 : i64,
                         max_capacity = 0 : i64} : f64
  return
}

// -----

/// Unknown capacity rules are parse errors.
func.func @negative_capacity_unknown_rule(%c: f64) {
  // expected-error @+2 {{expected ::mlir::vmoe::CapacityRule to be one of: round, ceil}}
  // expected-error @+1 {{failed to parse VMoE_CapacityRuleAttr parameter 'value' which is to be a `::mlir::vmoe::CapacityRule`}}
  %b = vmoe.capacity %c {k = 1 : i64, num_experts = 2 : i64, tokens_per_group = 8 : i64, max_capacity = 4 : i64, capacity_rule = #vmoe.capacity_rule<floor>} : f64
  return
}

// -----

/// dispatch-C1: x is G x S x D.
func.func @negative_dispatch_x_rank(%x: tensor<8x16xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{'x' must have rank 3 (G x S x D), got rank 2}}
  %b, %s = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<8x16xf32>, tensor<1x8x2xi32> -> tensor<4x1x4x16xf32>, tensor<1x8x2xi32>
  return
}

// -----

/// dispatch-C2: expert ids are G x S x k with the G and S of x.
func.func @negative_dispatch_ids_tokens(%x: tensor<1x8x16xf32>, %ids: tensor<1x7x2xi32>) {
  // expected-error @+1 {{'expert_ids' must have shape 1x8x? (G x S x k), got 1x7x2}}
  %b, %s = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x8x16xf32>, tensor<1x7x2xi32> -> tensor<4x1x4x16xf32>, tensor<1x7x2xi32>
  return
}

// -----

/// dispatch-C2: k is static.
func.func @negative_dispatch_dynamic_k(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x?xi32>) {
  // expected-error @+1 {{'expert_ids' dim 2 (k) must be static}}
  %b, %s = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x?xi32> -> tensor<4x1x4x16xf32>, tensor<1x8x?xi32>
  return
}

// -----

/// dispatch-C3: the priority order is G x S.
func.func @negative_dispatch_order_shape(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>, %o: tensor<8xi32>) {
  // expected-error @+1 {{'order' must have rank 2 (G x S), got rank 1}}
  %b, %s = vmoe.dispatch %x, %ids, %o {capacity = 4 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x2xi32>, tensor<8xi32> -> tensor<4x1x4x16xf32>, tensor<1x8x2xi32>
  return
}

// -----

/// dispatch-C4: buffers are E x G x B x D with the G and D of x.
func.func @negative_dispatch_buffers_width(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{'buffers' must have shape ?x1x?x16 (E x G x B x D), got 4x1x4x8}}
  %b, %s = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x2xi32> -> tensor<4x1x4x8xf32>, tensor<1x8x2xi32>
  return
}

// -----

/// dispatch-C4: E is static.
func.func @negative_dispatch_dynamic_experts(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{'buffers' dim 0 (E) must be static}}
  %b, %s = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x2xi32> -> tensor<?x1x4x16xf32>, tensor<1x8x2xi32>
  return
}

// -----

/// dispatch-C5: slots have the shape of the expert ids.
func.func @negative_dispatch_slots_shape(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{'slots' must have shape 1x8x2 (G x S x k), got 1x8x1}}
  %b, %s = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x2xi32> -> tensor<4x1x4x16xf32>, tensor<1x8x1xi32>
  return
}

// -----

/// dispatch-C5: slots are i32.
func.func @negative_dispatch_slots_type(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{result #1 must be ranked tensor of 32-bit signless integer values, but got 'tensor<1x8x2xf32>'}}
  %b, %s = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x2xi32> -> tensor<4x1x4x16xf32>, tensor<1x8x2xf32>
  return
}

// -----

/// dispatch-C6: k <= E.
func.func @negative_dispatch_k_above_experts(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x3xi32>) {
  // expected-error @+1 {{k (3) must not exceed the number of experts E (2)}}
  %b, %s = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x3xi32> -> tensor<2x1x4x16xf32>, tensor<1x8x3xi32>
  return
}

// -----

/// dispatch-C7: the capacity ratio is positive.
func.func @negative_dispatch_zero_ratio(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{capacity_ratio must be positive and finite, got 0}}
  %b, %s = vmoe.dispatch %x, %ids {capacity_ratio = 0.0 : f64}
      : tensor<1x8x16xf32>, tensor<1x8x2xi32> -> tensor<4x1x?x16xf32>, tensor<1x8x2xi32>
  return
}

// -----

/// dispatch-C7: the capacity ratio is not NaN.
func.func @negative_dispatch_nan_ratio(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{capacity_ratio must be positive and finite, got nan}}
  %b, %s = vmoe.dispatch %x, %ids {capacity_ratio = 0x7FF8000000000000 : f64}
      : tensor<1x8x16xf32>, tensor<1x8x2xi32> -> tensor<4x1x?x16xf32>, tensor<1x8x2xi32>
  return
}

// -----

/// dispatch-C8: a capacity or a capacity ratio is given.
func.func @negative_dispatch_no_capacity(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{requires a 'capacity' or a 'capacity_ratio' attribute}}
  %b, %s = vmoe.dispatch %x, %ids
      : tensor<1x8x16xf32>, tensor<1x8x2xi32> -> tensor<4x1x?x16xf32>, tensor<1x8x2xi32>
  return
}

// -----

/// dispatch-C8: multiple_of >= 1.
func.func @negative_dispatch_multiple_of_zero(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{multiple_of must be >= 1, got 0}}
  %b, %s = vmoe.dispatch %x, %ids {capacity_ratio = 1.0 : f64, multiple_of = 0 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x2xi32> -> tensor<4x1x?x16xf32>, tensor<1x8x2xi32>
  return
}

// -----

/// dispatch-C9: buffer dim 2 is the capacity.
func.func @negative_dispatch_capacity_mismatch(%x: tensor<1x196x768xf32>, %e: tensor<1x196x2xi32>,
                                               %o: tensor<1x196xi32>) {
  // expected-error @+1 {{'buffers' dim 2 (32) must equal capacity (64)}}
  %b, %s = vmoe.dispatch %x, %e, %o {capacity = 64 : i64}
      : tensor<1x196x768xf32>, tensor<1x196x2xi32>, tensor<1x196xi32> -> tensor<8x1x32x768xf32>, tensor<1x196x2xi32>
  return
}

// -----

/// dispatch-C9: B >= 1.
func.func @negative_dispatch_capacity_zero(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{capacity must be >= 1, got 0}}
  %b, %s = vmoe.dispatch %x, %ids {capacity = 0 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x2xi32> -> tensor<4x1x?x16xf32>, tensor<1x8x2xi32>
  return
}

// -----

/// dispatch-C9: the sized ratio gives B >= 1.
func.func @negative_dispatch_ratio_rounds_to_zero(%x: tensor<1x4x16xf32>, %ids: tensor<1x4x2xi32>) {
  // expected-error @+1 {{capacity rounds to 0 (k*S*C/E = 2*4*0.01/32 = 0.0025); raise capacity_ratio}}
  %b, %s = vmoe.dispatch %x, %ids {capacity_ratio = 0.01 : f64}
      : tensor<1x4x16xf32>, tensor<1x4x2xi32> -> tensor<32x1x?x16xf32>, tensor<1x4x2xi32>
  return
}

// -----

/// dispatch-C9: a static B equals the sized ratio (ties to even: 12.5 -> 12).
func.func @negative_dispatch_ratio_mismatch(%x: tensor<1x50x16xf32>, %ids: tensor<1x50x2xi32>) {
  // expected-error @+1 {{'buffers' dim 2 (13) must equal the sized capacity (12 = round(2*50*1/8))}}
  %b, %s = vmoe.dispatch %x, %ids {capacity_ratio = 1.0 : f64}
      : tensor<1x50x16xf32>, tensor<1x50x2xi32> -> tensor<8x1x13x16xf32>, tensor<1x50x2xi32>
  return
}

// -----

/// dispatch-C10: one element type for x and buffers.
func.func @negative_dispatch_element_type(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{failed to verify that all of {x, buffers} have same element type}}
  %b, %s = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x2xi32> -> tensor<4x1x4x16xf16>, tensor<1x8x2xi32>
  return
}

// -----

/// expert_ffn-C1: buffers are E x G x B x D.
func.func @negative_expert_ffn_buffers_rank(%b: tensor<4x4x8xf32>, %w1: tensor<4x8x16xf32>,
    %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) {
  // expected-error @+1 {{'buffers' must have rank 4 (E x G x B x D), got rank 3}}
  %y = vmoe.expert_ffn %b, %w1, %b1, %w2, %b2
      : tensor<4x4x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  return
}

// -----

/// expert_ffn-C2: w1 is E x D x H.
func.func @negative_expert_ffn_w1_shape(%b: tensor<4x1x4x8xf32>, %w1: tensor<4x6x16xf32>,
    %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) {
  // expected-error @+1 {{'w1' must have shape 4x8x16 (E x D x H), got 4x6x16}}
  %y = vmoe.expert_ffn %b, %w1, %b1, %w2, %b2
      : tensor<4x1x4x8xf32>, tensor<4x6x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  return
}

// -----

/// expert_ffn-C3: b1 is E x H.
func.func @negative_expert_ffn_b1_shape(%b: tensor<4x1x4x8xf32>, %w1: tensor<4x8x16xf32>,
    %b1: tensor<4x15xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) {
  // expected-error @+1 {{'b1' must have shape 4x16 (E x H), got 4x15}}
  %y = vmoe.expert_ffn %b, %w1, %b1, %w2, %b2
      : tensor<4x1x4x8xf32>, tensor<4x8x16xf32>, tensor<4x15xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  return
}

// -----

/// expert_ffn-C4: w2 is E x H x D.
func.func @negative_expert_ffn_w2_shape(%b: tensor<4x1x4x8xf32>, %w1: tensor<4x8x16xf32>,
    %b1: tensor<4x16xf32>, %w2: tensor<3x16x8xf32>, %b2: tensor<4x8xf32>) {
  // expected-error @+1 {{'w2' must have shape 4x16x8 (E x H x D), got 3x16x8}}
  %y = vmoe.expert_ffn %b, %w1, %b1, %w2, %b2
      : tensor<4x1x4x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<3x16x8xf32>, tensor<4x8xf32>
  return
}

// -----

/// expert_ffn-C5: b2 is E x D.
func.func @negative_expert_ffn_b2_shape(%b: tensor<4x1x4x8xf32>, %w1: tensor<4x8x16xf32>,
    %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{'b2' must have shape 4x8 (E x D), got 4x16}}
  %y = vmoe.expert_ffn %b, %w1, %b1, %w2, %b2
      : tensor<4x1x4x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x16xf32>
  return
}

// -----

/// expert_ffn-C6: one element type.
func.func @negative_expert_ffn_element_type(%b: tensor<4x1x4x8xf32>, %w1: tensor<4x8x16xbf16>,
    %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) {
  // expected-error @+1 {{failed to verify that all of {buffers, w1, b1, w2, b2} have same element type}}
  %y = vmoe.expert_ffn %b, %w1, %b1, %w2, %b2
      : tensor<4x1x4x8xf32>, tensor<4x8x16xbf16>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  return
}

// -----

/// expert_ffn-C1: the output has the type of the buffers (generic form).
func.func @negative_expert_ffn_output_type(%b: tensor<4x1x4x8xf32>, %w1: tensor<4x8x16xf32>,
    %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) {
  // expected-error @+1 {{failed to verify that all of {buffers, output} have same type}}
  %y = "vmoe.expert_ffn"(%b, %w1, %b1, %w2, %b2)
      : (tensor<4x1x4x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>)
      -> tensor<4x1x5x8xf32>
  return
}

// -----

/// Unknown activations are parse errors.
func.func @negative_expert_ffn_unknown_activation(%b: tensor<4x1x4x8xf32>, %w1: tensor<4x8x16xf32>,
    %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) {
  // expected-error @+2 {{expected ::mlir::vmoe::Activation to be one of: gelu_tanh, gelu_erf, relu, silu}}
  // expected-error @+1 {{failed to parse VMoE_ActivationAttr parameter 'value' which is to be a `::mlir::vmoe::Activation`}}
  %y = vmoe.expert_ffn %b, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<swish>}
      : tensor<4x1x4x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  return
}

// -----

/// combine-C1: expert outputs are E x G x B x D.
func.func @negative_combine_outputs_rank(%y: tensor<4x4x8xf32>, %ids: tensor<1x8x2xi32>,
    %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>) {
  // expected-error @+1 {{'expert_outputs' must have rank 4 (E x G x B x D), got rank 3}}
  %o = vmoe.combine %y, %ids, %s, %w
      : tensor<4x4x8xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32>, tensor<1x8x2xf32> -> tensor<1x8x8xf32>
  return
}

// -----

/// combine-C2: expert ids are G x S x k with the G of the expert outputs.
func.func @negative_combine_ids_groups(%y: tensor<4x1x4x8xf32>, %ids: tensor<2x8x2xi32>,
    %s: tensor<2x8x2xi32>, %w: tensor<2x8x2xf32>) {
  // expected-error @+1 {{'expert_ids' must have shape 1x?x? (G x S x k), got 2x8x2}}
  %o = vmoe.combine %y, %ids, %s, %w
      : tensor<4x1x4x8xf32>, tensor<2x8x2xi32>, tensor<2x8x2xi32>, tensor<2x8x2xf32> -> tensor<2x8x8xf32>
  return
}

// -----

/// combine-C3: slots have the shape of the expert ids.
func.func @negative_combine_slots_shape(%y: tensor<4x1x4x8xf32>, %ids: tensor<1x8x2xi32>,
    %s: tensor<1x8x1xi32>, %w: tensor<1x8x2xf32>) {
  // expected-error @+1 {{'slots' must have shape 1x8x2 (G x S x k), got 1x8x1}}
  %o = vmoe.combine %y, %ids, %s, %w
      : tensor<4x1x4x8xf32>, tensor<1x8x2xi32>, tensor<1x8x1xi32>, tensor<1x8x2xf32> -> tensor<1x8x8xf32>
  return
}

// -----

/// combine-C3: weights have the shape of the expert ids.
func.func @negative_combine_weights_shape(%y: tensor<4x1x4x8xf32>, %ids: tensor<1x8x2xi32>,
    %s: tensor<1x8x2xi32>, %w: tensor<1x9x2xf32>) {
  // expected-error @+1 {{'weights' must have shape 1x8x2 (G x S x k), got 1x9x2}}
  %o = vmoe.combine %y, %ids, %s, %w
      : tensor<4x1x4x8xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32>, tensor<1x9x2xf32> -> tensor<1x8x8xf32>
  return
}

// -----

/// combine-C4: k <= E.
func.func @negative_combine_k_above_experts(%y: tensor<2x1x4x8xf32>, %ids: tensor<1x8x3xi32>,
    %s: tensor<1x8x3xi32>, %w: tensor<1x8x3xf32>) {
  // expected-error @+1 {{k (3) must not exceed the number of experts E (2)}}
  %o = vmoe.combine %y, %ids, %s, %w
      : tensor<2x1x4x8xf32>, tensor<1x8x3xi32>, tensor<1x8x3xi32>, tensor<1x8x3xf32> -> tensor<1x8x8xf32>
  return
}

// -----

/// combine-C5: the output is G x S x D.
func.func @negative_combine_output_shape(%y: tensor<4x1x4x8xf32>, %ids: tensor<1x8x2xi32>,
    %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>) {
  // expected-error @+1 {{'output' must have shape 1x8x8 (G x S x D), got 1x8x4}}
  %o = vmoe.combine %y, %ids, %s, %w
      : tensor<4x1x4x8xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32>, tensor<1x8x2xf32> -> tensor<1x8x4xf32>
  return
}

// -----

/// combine-C6: one float element type.
func.func @negative_combine_element_type(%y: tensor<4x1x4x8xf32>, %ids: tensor<1x8x2xi32>,
    %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf16>) {
  // expected-error @+1 {{failed to verify that all of {expert_outputs, weights, output} have same element type}}
  %o = vmoe.combine %y, %ids, %s, %w
      : tensor<4x1x4x8xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32>, tensor<1x8x2xf16> -> tensor<1x8x8xf32>
  return
}

// -----

/// combine-C6: slots are i32.
func.func @negative_combine_slots_type(%y: tensor<4x1x4x8xf32>, %ids: tensor<1x8x2xi32>,
    %s: tensor<1x8x2xf32>, %w: tensor<1x8x2xf32>) {
  // expected-error @+1 {{operand #2 must be ranked tensor of 32-bit signless integer values, but got 'tensor<1x8x2xf32>'}}
  %o = vmoe.combine %y, %ids, %s, %w
      : tensor<4x1x4x8xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<1x8x2xf32> -> tensor<1x8x8xf32>
  return
}

// -----

/// assign_slots-C1: expert ids are G x S x k.
func.func @negative_assign_slots_ids_rank(%ids: tensor<8x2xi32>) {
  // expected-error @+1 {{'expert_ids' must have rank 3 (G x S x k), got rank 2}}
  %s, %e, %f = vmoe.assign_slots %ids : tensor<8x2xi32> -> tensor<1x8x2xi32>, tensor<4x1x4xi32>, tensor<4x1xi32>
  return
}

// -----

/// assign_slots-C2: the order is G x S.
func.func @negative_assign_slots_order(%ids: tensor<1x8x2xi32>, %o: tensor<1x7xi32>) {
  // expected-error @+1 {{'order' must have shape 1x8 (G x S), got 1x7}}
  %s, %e, %f = vmoe.assign_slots %ids, %o : tensor<1x8x2xi32>, tensor<1x7xi32> -> tensor<1x8x2xi32>, tensor<4x1x4xi32>, tensor<4x1xi32>
  return
}

// -----

/// assign_slots-C3: slots have the shape of the ids.
func.func @negative_assign_slots_slots(%ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{'slots' must have shape 1x8x2 (G x S x k), got 1x8x1}}
  %s, %e, %f = vmoe.assign_slots %ids : tensor<1x8x2xi32> -> tensor<1x8x1xi32>, tensor<4x1x4xi32>, tensor<4x1xi32>
  return
}

// -----

/// assign_slots-C4: slot entries have a static E and B.
func.func @negative_assign_slots_dynamic_capacity(%ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{'slot_entries' must have a static E and B >= 1, got 4x1x?}}
  %s, %e, %f = vmoe.assign_slots %ids : tensor<1x8x2xi32> -> tensor<1x8x2xi32>, tensor<4x1x?xi32>, tensor<4x1xi32>
  return
}

// -----

/// assign_slots-C4: k <= E.
func.func @negative_assign_slots_k_above_experts(%ids: tensor<1x8x3xi32>) {
  // expected-error @+1 {{k (3) must not exceed the number of experts E (2)}}
  %s, %e, %f = vmoe.assign_slots %ids : tensor<1x8x3xi32> -> tensor<1x8x3xi32>, tensor<2x1x4xi32>, tensor<2x1xi32>
  return
}

// -----

/// assign_slots-C5: fill is E x G.
func.func @negative_assign_slots_fill(%ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{'fill' must have shape 4x1 (E x G), got 4x2}}
  %s, %e, %f = vmoe.assign_slots %ids : tensor<1x8x2xi32> -> tensor<1x8x2xi32>, tensor<4x1x4xi32>, tensor<4x2xi32>
  return
}

// -----

/// fused_experts-C1: x is G x S x D.
func.func @negative_fused_experts_x_rank(%x: tensor<8x16xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x4xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x16x8xf32>, %b1: tensor<4x8xf32>,
    %w2: tensor<4x8x16xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{'x' must have rank 3 (G x S x D), got rank 2}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      : tensor<8x16xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x4xi32>, tensor<4x1xi32>,
        tensor<4x16x8xf32>, tensor<4x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>
  return
}

// -----

/// fused_experts-C2: weights are G x S x k.
func.func @negative_fused_experts_weights(%x: tensor<1x8x16xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x1xf32>,
    %e: tensor<4x1x4xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x16x8xf32>, %b1: tensor<4x8xf32>,
    %w2: tensor<4x8x16xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{'weights' must have shape 1x8x2 (G x S x k), got 1x8x1}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x2xi32>, tensor<1x8x1xf32>, tensor<4x1x4xi32>, tensor<4x1xi32>,
        tensor<4x16x8xf32>, tensor<4x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>
  return
}

// -----

/// fused_experts-C3: fill is E x G.
func.func @negative_fused_experts_fill(%x: tensor<1x8x16xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x4xi32>, %f: tensor<3x1xi32>, %w1: tensor<4x16x8xf32>, %b1: tensor<4x8xf32>,
    %w2: tensor<4x8x16xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{'fill' must have shape 4x1 (E x G), got 3x1}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x4xi32>, tensor<3x1xi32>,
        tensor<4x16x8xf32>, tensor<4x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>
  return
}

// -----

/// fused_experts-C4: w2 is E x H x D.
func.func @negative_fused_experts_w2(%x: tensor<1x8x16xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x4xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x16x8xf32>, %b1: tensor<4x8xf32>,
    %w2: tensor<4x8x12xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{'w2' must have shape 4x8x16 (E x H x D), got 4x8x12}}
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x4xi32>, tensor<4x1xi32>,
        tensor<4x16x8xf32>, tensor<4x8xf32>, tensor<4x8x12xf32>, tensor<4x16xf32>
  return
}

// -----

/// fused_experts-C1: the output has the type of x.
func.func @negative_fused_experts_output(%x: tensor<1x8x16xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x4xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x16x8xf32>, %b1: tensor<4x8xf32>,
    %w2: tensor<4x8x16xf32>, %b2: tensor<4x16xf32>) {
  // expected-error @+1 {{failed to verify that all of {x, output} have same type}}
  %o = "vmoe.fused_experts"(%x, %s, %w, %e, %f, %w1, %b1, %w2, %b2)
      : (tensor<1x8x16xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x4xi32>, tensor<4x1xi32>,
         tensor<4x16x8xf32>, tensor<4x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>) -> tensor<1x9x16xf32>
  return
}

// -----

/// fused_route-C1: k <= E.
func.func @negative_fused_route_k(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{k (5) must not exceed the number of experts E (4)}}
  %ids, %w, %s, %e, %f = vmoe.fused_route %x, %r {k = 5 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf32>
      -> tensor<1x8x5xi32>, tensor<1x8x5xf32>, tensor<1x8x5xi32>, tensor<4x1x2xi32>, tensor<4x1xi32>
  return
}

// -----

/// fused_route-C1: router dim 0 is the model width of x.
func.func @negative_fused_route_router(%x: tensor<1x8x16xf32>, %r: tensor<8x4xf32>) {
  // expected-error @+1 {{'router' dim 0 (8) must equal the model width D of 'x' (16)}}
  %ids, %w, %s, %e, %f = vmoe.fused_route %x, %r {k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<8x4xf32>
      -> tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<1x8x2xi32>, tensor<4x1x2xi32>, tensor<4x1xi32>
  return
}

// -----

/// fused_route-C2: slots are G x S x k.
func.func @negative_fused_route_slots(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{'slots' must have shape 1x8x2 (G x S x k), got 1x8x1}}
  %ids, %w, %s, %e, %f = vmoe.fused_route %x, %r {k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf32>
      -> tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<1x8x1xi32>, tensor<4x1x2xi32>, tensor<4x1xi32>
  return
}

// -----

/// fused_route-C3: B is static.
func.func @negative_fused_route_dynamic_capacity(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{'slot_entries' must have a static B >= 1, got 4x1x?}}
  %ids, %w, %s, %e, %f = vmoe.fused_route %x, %r {k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf32>
      -> tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<1x8x2xi32>, tensor<4x1x?xi32>, tensor<4x1xi32>
  return
}

// -----

/// fused_route-C4: score_k only with sum_topk.
func.func @negative_fused_route_score_k(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) {
  // expected-error @+1 {{'score_k' is only used by priority sum_topk}}
  %ids, %w, %s, %e, %f = vmoe.fused_route %x, %r {k = 2 : i64, priority = #vmoe.priority_score<max>, score_k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf32>
      -> tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<1x8x2xi32>, tensor<4x1x2xi32>, tensor<4x1xi32>
  return
}

// -----

/// dispatch-C11: the valid-token count is an index.
func.func @negative_dispatch_valid_not_index(%x: tensor<1x8x4xf32>, %ids: tensor<1x8x1xi32>, %n: i32)
    -> tensor<1x8x1xi32> {
  // expected-error @+1 {{operand #2 must be index, but got 'i32'}}
  %b, %s = "vmoe.dispatch"(%x, %ids, %n) <{capacity = 3 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 0, 1>}>
      : (tensor<1x8x4xf32>, tensor<1x8x1xi32>, i32) -> (tensor<2x1x3x4xf32>, tensor<1x8x1xi32>)
  return %s : tensor<1x8x1xi32>
}

// -----

/// assign_slots-C6: the valid-token count is an index.
func.func @negative_assign_slots_valid_not_index(%ids: tensor<1x8x1xi32>, %n: i64) -> tensor<2x1xi32> {
  // expected-error @+1 {{operand #1 must be index, but got 'i64'}}
  %s, %e, %f = "vmoe.assign_slots"(%ids, %n) <{operandSegmentSizes = array<i32: 1, 0, 0, 1>}>
      : (tensor<1x8x1xi32>, i64) -> (tensor<1x8x1xi32>, tensor<2x1x3xi32>, tensor<2x1xi32>)
  return %f : tensor<2x1xi32>
}

// -----

/// fused_route-C5: the valid-token count is an index.
func.func @negative_fused_route_valid_not_index(%x: tensor<1x8x4xf32>, %r: tensor<4x2xf32>, %n: f32)
    -> tensor<2x1xi32> {
  // expected-error @+1 {{operand #2 must be index, but got 'f32'}}
  %ids, %w, %s, %e, %f = "vmoe.fused_route"(%x, %r, %n) <{k = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 1>}>
      : (tensor<1x8x4xf32>, tensor<4x2xf32>, f32)
      -> (tensor<1x8x1xi32>, tensor<1x8x1xf32>, tensor<1x8x1xi32>, tensor<2x1x3xi32>, tensor<2x1xi32>)
  return %f : tensor<2x1xi32>
}

// -----

/// attention-C1: q, k and v are [N, T, heads, dh].
func.func @negative_attention_rank(%q: tensor<50x8x64xf32>, %k: tensor<2x50x8x64xf32>, %v: tensor<2x50x8x64xf32>) {
  // expected-error @+1 {{'q' must have rank 4 (N x T x H x dh), got rank 3}}
  %c = "vmoe.attention"(%q, %k, %v) : (tensor<50x8x64xf32>, tensor<2x50x8x64xf32>, tensor<2x50x8x64xf32>) -> tensor<50x8x64xf32>
  return
}

// -----

/// attention-C1: f32, or bf16 with bf16_products; f16 never.
func.func @negative_attention_f16(%q: tensor<2x50x8x64xf16>, %k: tensor<2x50x8x64xf16>, %v: tensor<2x50x8x64xf16>) {
  // expected-error @+1 {{'q' must be f32 (or bf16 with bf16_products), got 'f16'}}
  %c = vmoe.attention %q, %k, %v {bf16_products} : tensor<2x50x8x64xf16>, tensor<2x50x8x64xf16>, tensor<2x50x8x64xf16>
  return
}

// -----

/// attention-C1: bf16 operands only with bf16_products (f32 products of
/// bf16 values would be a different op).
func.func @negative_attention_bf16_without_products(%q: tensor<2x50x8x64xbf16>, %k: tensor<2x50x8x64xbf16>, %v: tensor<2x50x8x64xbf16>) {
  // expected-error @+1 {{'q' must be f32 (or bf16 with bf16_products), got 'bf16'}}
  %c = vmoe.attention %q, %k, %v : tensor<2x50x8x64xbf16>, tensor<2x50x8x64xbf16>, tensor<2x50x8x64xbf16>
  return
}

// -----

/// q, k and v of one element type.
func.func @negative_attention_mixed_types(%q: tensor<2x50x8x64xbf16>, %k: tensor<2x50x8x64xf32>, %v: tensor<2x50x8x64xf32>) {
  // expected-error @+1 {{all of {q, k, v} have same element type}}
  %c = "vmoe.attention"(%q, %k, %v) {bf16_products} : (tensor<2x50x8x64xbf16>, tensor<2x50x8x64xf32>, tensor<2x50x8x64xf32>) -> tensor<2x50x8x64xf32>
  return
}

// -----

/// attention-C1: static shapes.
func.func @negative_attention_dynamic(%q: tensor<?x50x8x64xf32>, %k: tensor<2x50x8x64xf32>, %v: tensor<2x50x8x64xf32>) {
  // expected-error @+1 {{'q' must have a static shape, got ?x50x8x64}}
  %c = vmoe.attention %q, %k, %v : tensor<?x50x8x64xf32>, tensor<2x50x8x64xf32>, tensor<2x50x8x64xf32>
  return
}

// -----

/// attention-C2: k and v of one shape.
func.func @negative_attention_v_shape(%q: tensor<2x50x8x64xf32>, %k: tensor<2x50x8x64xf32>, %v: tensor<2x49x8x64xf32>) {
  // expected-error @+1 {{'v' must have the shape of 'k' 2x50x8x64, got 2x49x8x64}}
  %c = vmoe.attention %q, %k, %v : tensor<2x50x8x64xf32>, tensor<2x50x8x64xf32>, tensor<2x49x8x64xf32>
  return
}

// -----

/// attention-C3: q has k's N, H and dh (its T may differ: class queries).
func.func @negative_attention_q_heads(%q: tensor<2x1x4x64xf32>, %k: tensor<2x50x8x64xf32>, %v: tensor<2x50x8x64xf32>) {
  // expected-error @+1 {{'q' must have the N, H and dh of 'k' 2x50x8x64, got 2x1x4x64}}
  %c = vmoe.attention %q, %k, %v : tensor<2x1x4x64xf32>, tensor<2x50x8x64xf32>, tensor<2x50x8x64xf32>
  return
}

// -----

/// The result has q's shape, in f32.
func.func @negative_attention_result(%q: tensor<2x50x8x64xf32>, %k: tensor<2x50x8x64xf32>, %v: tensor<2x50x8x64xf32>) {
  // expected-error @+1 {{result has q's shape in f32}}
  %c = "vmoe.attention"(%q, %k, %v) : (tensor<2x50x8x64xf32>, tensor<2x50x8x64xf32>, tensor<2x50x8x64xf32>) -> tensor<2x1x8x64xf32>
  return
}
