// RUN: vmoe-opt %s -split-input-file -verify-diagnostics

// SPEC §11 in the verifiers (docs/Limits.md): every static dimension of a
// vmoe op's operands and results is in [1, 2^24] and every tensor has at
// most 2^40 elements (vmoe-C1), every integer attribute is at most 2^24
// (vmoe-C2); a constant capacity ratio is finite and in
// (0, 4096] (capacity-C2). Zero sizes used to verify and then lower to
// invalid IR; sizes near 2^62 overflowed the lowering's index arithmetic.

/// vmoe-C1: G = 0.
func.func @negative_route_zero_groups(%x: tensor<0x4x2xf32>, %r: tensor<2x2xf32>) {
  // expected-error @+1 {{operand #0 dim 0 must be in [1, 16777216], got 0 in 'tensor<0x4x2xf32>'}}
  %g, %i, %w = vmoe.route %x, %r {k = 1 : i64}
      : tensor<0x4x2xf32>, tensor<2x2xf32> -> tensor<0x4x2xf32>, tensor<0x4x1xi32>, tensor<0x4x1xf32>
  return
}

// -----

/// vmoe-C1: D = 0.
func.func @negative_dispatch_zero_width(%x: tensor<1x8x0xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{operand #0 dim 2 must be in [1, 16777216], got 0 in 'tensor<1x8x0xf32>'}}
  %b, %s = vmoe.dispatch %x, %ids {capacity = 4 : i64}
      : tensor<1x8x0xf32>, tensor<1x8x2xi32> -> tensor<4x1x4x0xf32>, tensor<1x8x2xi32>
  return
}

// -----

/// vmoe-C1: H = 0.
func.func @negative_expert_ffn_zero_hidden(%b: tensor<4x1x4x8xf32>, %w1: tensor<4x8x0xf32>,
    %b1: tensor<4x0xf32>, %w2: tensor<4x0x8xf32>, %b2: tensor<4x8xf32>) {
  // expected-error @+1 {{operand #1 dim 2 must be in [1, 16777216], got 0 in 'tensor<4x8x0xf32>'}}
  %y = vmoe.expert_ffn %b, %w1, %b1, %w2, %b2
      : tensor<4x1x4x8xf32>, tensor<4x8x0xf32>, tensor<4x0xf32>, tensor<4x0x8xf32>, tensor<4x8xf32>
  return
}

// -----

/// vmoe-C1: S near 2^62.
func.func @negative_route_huge_tokens(%x: tensor<1x4611686018427387904x2xf32>, %r: tensor<2x2xf32>) {
  // expected-error @+1 {{operand #0 dim 1 must be in [1, 16777216], got 4611686018427387904}}
  %g, %i, %w = vmoe.route %x, %r {k = 1 : i64}
      : tensor<1x4611686018427387904x2xf32>, tensor<2x2xf32>
      -> tensor<1x4611686018427387904x2xf32>, tensor<1x4611686018427387904x1xi32>,
         tensor<1x4611686018427387904x1xf32>
  return
}

// -----

/// vmoe-C1: B near 2^62.
func.func @negative_dispatch_huge_capacity(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{result #0 dim 2 must be in [1, 16777216], got 4611686018427387904}}
  %b, %s = vmoe.dispatch %x, %ids {capacity = 4611686018427387904 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x2xi32> -> tensor<4x1x4611686018427387904x16xf32>, tensor<1x8x2xi32>
  return
}

// -----

/// vmoe-C1: dimensions within the limit, more than 2^40 elements in all.
func.func @negative_assign_slots_too_many_elements(%ids: tensor<16777216x16777216x1xi32>) {
  // expected-error @+1 {{operand #0 has more than 1099511627776 elements: 'tensor<16777216x16777216x1xi32>'}}
  %s, %e, %f = vmoe.assign_slots %ids
      : tensor<16777216x16777216x1xi32>
      -> tensor<16777216x16777216x1xi32>, tensor<2x16777216x2xi32>, tensor<2x16777216xi32>
  return
}

// -----

// vmoe-C1 is a trait of every vmoe op (the base class), so the ops whose
// verifiers once skipped it check it too: router_losses, expert_swiglu,
// expert_shard, exchange_dispatch, exchange_combine, unpack_panels.

/// vmoe-C1: S = 0 (router_losses).
func.func @negative_router_losses_zero_tokens(%x: tensor<1x0x4xf32>, %r: tensor<4x2xf32>) {
  // expected-error @+1 {{operand #0 dim 1 must be in [1, 16777216], got 0 in 'tensor<1x0x4xf32>'}}
  %i, %l, %g = vmoe.router_losses %x, %r {k = 1 : i64}
      : tensor<1x0x4xf32>, tensor<4x2xf32> -> tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
  return
}

// -----

/// vmoe-C1: G near 2^62 (router_losses, results).
func.func @negative_router_losses_huge_groups(%x: tensor<?x4x4xf32>, %r: tensor<4x2xf32>) {
  // expected-error @+1 {{result #0 dim 0 must be in [1, 16777216], got 4611686018427387904 in 'tensor<4611686018427387904xf32>'}}
  %i, %l, %g = vmoe.router_losses %x, %r {k = 1 : i64}
      : tensor<?x4x4xf32>, tensor<4x2xf32>
      -> tensor<4611686018427387904xf32>, tensor<4611686018427387904xf32>, tensor<4611686018427387904xf32>
  return
}

// -----

/// vmoe-C1: D = 2^40 (expert_swiglu).
func.func @negative_expert_swiglu_huge_width(%b: tensor<2x1x4x1099511627776xf32>,
    %wg: tensor<2x1099511627776x8xf32>, %wu: tensor<2x1099511627776x8xf32>,
    %wd: tensor<2x8x1099511627776xf32>) {
  // expected-error @+1 {{operand #0 dim 3 must be in [1, 16777216], got 1099511627776 in 'tensor<2x1x4x1099511627776xf32>'}}
  %y = vmoe.expert_swiglu %b, %wg, %wu, %wd
      : tensor<2x1x4x1099511627776xf32>, tensor<2x1099511627776x8xf32>,
        tensor<2x1099511627776x8xf32>, tensor<2x8x1099511627776xf32>
  return
}

// -----

/// vmoe-C1: H = 0 (expert_swiglu).
func.func @negative_expert_swiglu_zero_hidden(%b: tensor<2x1x4x8xf32>, %wg: tensor<2x8x0xf32>,
    %wu: tensor<2x8x0xf32>, %wd: tensor<2x0x8xf32>) {
  // expected-error @+1 {{operand #1 dim 2 must be in [1, 16777216], got 0 in 'tensor<2x8x0xf32>'}}
  %y = vmoe.expert_swiglu %b, %wg, %wu, %wd
      : tensor<2x1x4x8xf32>, tensor<2x8x0xf32>, tensor<2x8x0xf32>, tensor<2x0x8xf32>
  return
}

// -----

/// vmoe-C1: k = 0 (exchange_dispatch, expert_ids G x S x k).
func.func @negative_exchange_dispatch_zero_choices(%b: tensor<4x1x4x8xf32>, %ids: tensor<1x8x0xi32>,
    %slots: tensor<1x8x0xi32>) {
  // expected-error @+1 {{operand #1 dim 2 must be in [1, 16777216], got 0 in 'tensor<1x8x0xi32>'}}
  %rows = vmoe.exchange_dispatch %b, %ids, %slots {layer = 0 : i64, ranks = 2 : i64}
      : tensor<4x1x4x8xf32>, tensor<1x8x0xi32>, tensor<1x8x0xi32> -> tensor<2x2x4x8xf32>
  return
}

// -----

/// vmoe-C1: G near 2^62 (exchange_combine).
func.func @negative_exchange_combine_huge_groups(%rows: tensor<2x?x4x8xf32>,
    %ids: tensor<4611686018427387904x8x2xi32>, %slots: tensor<4611686018427387904x8x2xi32>) {
  // expected-error @+1 {{operand #1 dim 0 must be in [1, 16777216], got 4611686018427387904}}
  %y = vmoe.exchange_combine %rows, %ids, %slots {layer = 0 : i64, ranks = 2 : i64}
      : tensor<2x?x4x8xf32>, tensor<4611686018427387904x8x2xi32>, tensor<4611686018427387904x8x2xi32>
      -> tensor<4x4611686018427387904x4x8xf32>
  return
}

// -----

/// vmoe-C1: more than 2^40 elements (expert_shard).
func.func @negative_expert_shard_too_many_elements(%w: tensor<4x16777216x16777216xf32>) {
  // expected-error @+1 {{operand #0 has more than 1099511627776 elements: 'tensor<4x16777216x16777216xf32>'}}
  %s = vmoe.expert_shard %w {ranks = 2 : i64}
      : tensor<4x16777216x16777216xf32> -> tensor<2x16777216x16777216xf32>
  return
}

// -----

/// vmoe-C1: K = 0 (unpack_panels).
func.func @negative_unpack_panels_zero_rows(%p: tensor<2x0x8xf32>) {
  // expected-error @+1 {{operand #0 dim 1 must be in [1, 16777216], got 0 in 'tensor<2x0x8xf32>'}}
  %w = vmoe.unpack_panels %p : tensor<2x0x8xf32> -> tensor<0x16xf32>
  return
}

// -----

/// vmoe-C2: k near 2^62 with a dynamic E (route-C3 cannot compare).
func.func @negative_route_huge_k(%x: tensor<1x4x2xf32>, %r: tensor<2x?xf32>) {
  // expected-error @+1 {{attribute 'k' must be <= 16777216 (the limit), got 4611686018427387904}}
  %g, %i, %w = vmoe.route %x, %r {k = 4611686018427387904 : i64}
      : tensor<1x4x2xf32>, tensor<2x?xf32> -> tensor<1x4x?xf32>, tensor<1x4x?xi32>, tensor<1x4x?xf32>
  return
}

// -----

/// vmoe-C2: tokens_per_group above the limit (capacity).
func.func @negative_capacity_huge_tokens(%c: f64) -> index {
  // expected-error @+1 {{attribute 'tokens_per_group' must be <= 16777216 (the limit), got 1099511627776}}
  %b = vmoe.capacity %c {k = 1 : i64, num_experts = 2 : i64, tokens_per_group = 1099511627776 : i64,
                         max_capacity = 4 : i64} : f64
  return %b : index
}

// -----

/// vmoe-C2: ranks above the limit (exchange_dispatch).
func.func @negative_exchange_dispatch_huge_ranks(%b: tensor<?x1x4x8xf32>, %ids: tensor<1x8x2xi32>,
    %slots: tensor<1x8x2xi32>) {
  // expected-error @+1 {{attribute 'ranks' must be <= 16777216 (the limit), got 4611686018427387904}}
  %rows = vmoe.exchange_dispatch %b, %ids, %slots {layer = 0 : i64, ranks = 4611686018427387904 : i64}
      : tensor<?x1x4x8xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32> -> tensor<?x?x4x8xf32>
  return
}

// -----

/// vmoe-C2: multiple_of above the limit (dispatch).
func.func @negative_dispatch_huge_multiple(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>) {
  // expected-error @+1 {{attribute 'multiple_of' must be <= 16777216 (the limit), got 16777217}}
  %b, %s = vmoe.dispatch %x, %ids {capacity_ratio = 1.0 : f64, multiple_of = 16777217 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x2xi32> -> tensor<4x1x?x16xf32>, tensor<1x8x2xi32>
  return
}

// -----

/// capacity-C2: a constant ratio < 0.
func.func @negative_capacity_constant_negative() -> index {
  %c = arith.constant -1.0 : f64
  // expected-error @+1 {{constant capacity_ratio must be a finite number in (0, 4096], got -1}}
  %b = vmoe.capacity %c {k = 1 : i64, num_experts = 2 : i64, tokens_per_group = 8 : i64,
                         max_capacity = 4 : i64} : f64
  return %b : index
}

// -----

/// capacity-C2: a constant NaN ratio.
func.func @negative_capacity_constant_nan() -> index {
  %c = arith.constant 0x7FF8000000000000 : f64
  // expected-error @+1 {{constant capacity_ratio must be a finite number in (0, 4096], got nan}}
  %b = vmoe.capacity %c {k = 1 : i64, num_experts = 2 : i64, tokens_per_group = 8 : i64,
                         max_capacity = 4 : i64} : f64
  return %b : index
}

// -----

/// capacity-C2: a constant ratio above the limit.
func.func @negative_capacity_constant_huge() -> index {
  %c = arith.constant 1.0e300 : f64
  // expected-error @+1 {{constant capacity_ratio must be a finite number in (0, 4096], got 1e+300}}
  %b = vmoe.capacity %c {k = 1 : i64, num_experts = 2 : i64, tokens_per_group = 8 : i64,
                         max_capacity = 4 : i64} : f64
  return %b : index
}

// -----

/// A ratio only known at run time is not checked (C <= 0 gives B = 0 there).
func.func @capacity_runtime_ratio(%c: f64) -> index {
  %b = vmoe.capacity %c {k = 1 : i64, num_experts = 2 : i64, tokens_per_group = 8 : i64,
                         max_capacity = 4 : i64} : f64
  return %b : index
}
