//===- VMoEOps.td - vmoe operations ------------------------*- tablegen -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Tensor-level operations of a sparse MoE layer. Semantics: docs/Dialect.md
// (written from SPEC.md §3-§5); every rule ID below has a negative test in
// test/Dialect/VMoE/invalid.mlir.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_DIALECT_VMOE_IR_VMOEOPS_TD
#define VMOE_DIALECT_VMOE_IR_VMOEOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "vmoe/Dialect/VMoE/IR/VMoEDialect.td"
include "vmoe/Dialect/VMoE/IR/VMoEAttrs.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def VMoE_FloatTensor : RankedTensorOf<[AnyFloat]>;
def VMoE_I32Tensor : RankedTensorOf<[I32]>;

//===----------------------------------------------------------------------===//
// RouteOp
//===----------------------------------------------------------------------===//

def VMoE_RouteOp : VMoE_Op<"route", [Pure,
    AllElementTypesMatch<["x", "router", "gates", "weights"]>]> {
  let summary = "Router: gates, top-k experts and their weights per token";
  let description = [{
    Computes `logits = x . router` for every token and derives the routing
    decision:

    * `order = softmax_topk` (V-MoE, default): `gates = softmax(logits)` over
      the E experts, then the top `k` gates. `weights` are the raw gate values
      of the chosen experts.
    * `order = topk_softmax` (Shazeer KeepTopK, Mixtral): the top `k` logits
      are chosen and `weights` is a softmax over those `k` logits only.
      `gates` is still the full softmax over E (BPR scores read it).

    Ties in top-k go to the lower expert index; `expert_ids[g, t, 0]` is the
    best expert. With `normalize = true` the `k` weights are divided by their
    sum. With `noise_std` (training graphs only) the caller passes standard
    normal samples `noise` (`G x S x E`) and the router adds
    `noise * noise_std / E` to the logits before anything else; keeping the
    random source outside makes the op pure and reproducible.

    Rules: route-C1 (x rank 3), route-C2 (router `D x E` with D of x),
    route-C3 (`1 <= k <= E`), route-C4 (gates `G x S x E`), route-C5
    (expert_ids and weights `G x S x k`), route-C6 (one float element type),
    route-C7 (expert_ids are i32), route-C8 (noise iff noise_std, shape of
    gates, `noise_std >= 0`).

    ```mlir
    %gates, %ids, %weights = vmoe.route %x, %router {k = 2 : i64}
        : tensor<2x400x512xf32>, tensor<512x32xf32>
        -> tensor<2x400x32xf32>, tensor<2x400x2xi32>, tensor<2x400x2xf32>
    ```
  }];
  let arguments = (ins
    VMoE_FloatTensor:$x,
    VMoE_FloatTensor:$router,
    Optional<VMoE_FloatTensor>:$noise,
    ConfinedAttr<I64Attr, [IntPositive]>:$k,
    DefaultValuedAttr<BoolAttr, "false">:$normalize,
    DefaultValuedAttr<VMoE_RouteOrderAttr, "RouteOrder::softmax_topk">:$order,
    OptionalAttr<F64Attr>:$noise_std
  );
  let results = (outs
    VMoE_FloatTensor:$gates,
    VMoE_I32Tensor:$expert_ids,
    VMoE_FloatTensor:$weights
  );
  let assemblyFormat = [{
    $x `,` $router (`noise` `(` $noise^ `:` type($noise) `)`)? attr-dict
    `:` type($x) `,` type($router)
    `->` type($gates) `,` type($expert_ids) `,` type($weights)
  }];
  let builders = [
    OpBuilder<(ins "Value":$x, "Value":$router, "int64_t":$k,
                   CArg<"RouteOrder", "RouteOrder::softmax_topk">:$order,
                   CArg<"bool", "false">:$normalize)>
  ];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// BPRSortOp
//===----------------------------------------------------------------------===//

def VMoE_BPRSortOp : VMoE_Op<"bpr_sort", [Pure]> {
  let summary = "Batch Prioritized Routing: tokens by descending priority";
  let description = [{
    Returns, per group, the permutation of token indices sorted by descending
    priority score; the sort is stable (equal scores keep token order). The
    input is `G x S x N`: router gates (`N = E`) or the chosen weights
    (`N = k`). The score of a token is

    * `score = max` (default): the largest of its N values;
    * `score = sum_topk`: the sum of its `k` largest values, added from the
      largest down (`k` defaults to N, i.e. the sum of all N values).

    `vmoe.dispatch` then grants capacity to confident tokens first.

    Rules: bpr_sort-C1 (input rank 3), bpr_sort-C2 (order `G x S`),
    bpr_sort-C3 (`1 <= k <= N`), bpr_sort-C4 (`k` only with `sum_topk`).

    ```mlir
    %order = vmoe.bpr_sort %gates : tensor<2x400x32xf32> -> tensor<2x400xi32>
    %order2 = vmoe.bpr_sort %gates {score = #vmoe.priority_score<sum_topk>,
                                    k = 2 : i64}
        : tensor<2x400x32xf32> -> tensor<2x400xi32>
    ```
  }];
  let arguments = (ins
    VMoE_FloatTensor:$gates,
    DefaultValuedAttr<VMoE_PriorityScoreAttr, "PriorityScore::max">:$score,
    OptionalAttr<I64Attr>:$k
  );
  let results = (outs VMoE_I32Tensor:$order);
  let assemblyFormat = "$gates attr-dict `:` type($gates) `->` type($order)";
  let builders = [
    OpBuilder<(ins "Value":$gates,
                   CArg<"PriorityScore", "PriorityScore::max">:$score,
                   CArg<"std::optional<int64_t>", "std::nullopt">:$k)>
  ];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// CapacityOp
//===----------------------------------------------------------------------===//

def VMoE_CapacityOp : VMoE_Op<"capacity", [Pure]> {
  let summary = "Per-expert capacity from a runtime capacity ratio";
  let description = [{
    Computes the per-expert capacity `B` from a capacity ratio `C` known only
    at run time, with the rule of `vmoe.dispatch` (docs/Dialect.md, sizing):
    `rule(k * tokens_per_group * C / num_experts)` in double precision,
    raised to a multiple of `multiple_of`, then clamped to
    `[0, max_capacity]`. At run time `C <= 0` or NaN gives 0 (every choice
    is dropped); a constant C must be finite and in (0, 4096] (capacity-C2).
    Its result feeds the `capacity` operand of `vmoe.dispatch`, so a compiled
    model can run at a smaller C than it was sized for.

    Rules: capacity-C1 (`k <= num_experts`), capacity-C2 (a constant ratio
    is finite and in (0, 4096]).

    ```mlir
    %b = vmoe.capacity %c {k = 2 : i64, num_experts = 32 : i64,
                           tokens_per_group = 400 : i64,
                           max_capacity = 26 : i64} : f64
    ```
  }];
  let arguments = (ins
    F64:$capacity_ratio,
    ConfinedAttr<I64Attr, [IntPositive]>:$k,
    ConfinedAttr<I64Attr, [IntPositive]>:$num_experts,
    ConfinedAttr<I64Attr, [IntPositive]>:$tokens_per_group,
    ConfinedAttr<I64Attr, [IntPositive]>:$max_capacity,
    DefaultValuedAttr<VMoE_CapacityRuleAttr, "CapacityRule::round">:$capacity_rule,
    DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>, "1">:$multiple_of
  );
  let results = (outs Index:$capacity);
  let assemblyFormat = "$capacity_ratio attr-dict `:` type($capacity_ratio)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// DispatchOp
//===----------------------------------------------------------------------===//

def VMoE_DispatchOp : VMoE_Op<"dispatch", [Pure, AttrSizedOperandSegments,
    AllElementTypesMatch<["x", "buffers"]>]> {
  let summary = "Fill fixed-capacity expert buffers, dropping overflow";
  let description = [{
    Per group, choice by choice: for `i = 0 .. k-1`, for each token `t` in
    priority order (`order`, from `vmoe.bpr_sort`; token order when absent,
    which is vanilla routing), with `e = expert_ids[g, t, i]`: if `fill[e] <
    B` then `slots[g, t, i] = fill[e]++` and row `x[g, t]` is copied to
    `buffers[e, g, slot]`; otherwise `slots[g, t, i] = -1` (dropped). Every
    top-1 choice is placed before any top-2 choice. Unfilled rows are zero.
    A choice whose expert id is outside `[0, E)` (e.g. -1) takes no slot
    (`slots` -1): the front end leaves choices out this way when the last
    block computes only the class tokens' rows.

    The capacity B is, in order of precedence:

    * `capacity`: a static B, set by `vmoe-buffer-sizing`;
    * otherwise `rule(k * S * capacity_ratio / E)` rounded up to a multiple of
      `multiple_of` (`capacity_rule` = `round`, ties to even, or `ceil`),
      computed in double precision; the result dim 2 stays dynamic (`?`)
      until sizing makes it static.

    The optional index operand `capacity` lowers B at run time: the effective
    capacity is `min(capacity operand, B)`, with the buffers still allocated
    at the static B (the maximum).

    The optional index operand `valid(%n)` masks tokens out of routing: token
    `t` of group `g` is routed only if `g * S + t < n` (its position in the
    flattened `G x S` tokens); the others take no slot (`slots` -1 for all
    their choices) and leave every expert's fill unchanged, so they never
    compete for capacity. Padding images at the end of a batch are masked
    this way.

    Rules: dispatch-C1 (x rank 3), dispatch-C2 (expert_ids `G x S x k`),
    dispatch-C3 (order `G x S`), dispatch-C4 (buffers `E x G x B x D`, E
    static), dispatch-C5 (slots shape of expert_ids), dispatch-C6
    (`k <= E`), dispatch-C7 (`capacity_ratio` positive and finite),
    dispatch-C8 (a capacity or a capacity ratio is given), dispatch-C9 (B
    equals `capacity`, or the sized ratio when S is static; B >= 1),
    dispatch-C10 (one element type for x and buffers), dispatch-C11 (`valid`
    is an index).

    ```mlir
    %buffers, %slots = vmoe.dispatch %x, %ids, %order {capacity = 26 : i64}
        : tensor<2x400x512xf32>, tensor<2x400x2xi32>, tensor<2x400xi32>
        -> tensor<32x2x26x512xf32>, tensor<2x400x2xi32>
    %buffers2, %slots2 = vmoe.dispatch %x, %ids, %order valid(%n)
        {capacity = 26 : i64}
        : tensor<2x400x512xf32>, tensor<2x400x2xi32>, tensor<2x400xi32>
        -> tensor<32x2x26x512xf32>, tensor<2x400x2xi32>
    ```
  }];
  let arguments = (ins
    VMoE_FloatTensor:$x,
    VMoE_I32Tensor:$expert_ids,
    Optional<VMoE_I32Tensor>:$order,
    Optional<Index>:$runtime_capacity,
    Optional<Index>:$num_valid,
    OptionalAttr<F64Attr>:$capacity_ratio,
    DefaultValuedAttr<VMoE_CapacityRuleAttr, "CapacityRule::round">:$capacity_rule,
    DefaultValuedAttr<I64Attr, "1">:$multiple_of,
    OptionalAttr<I64Attr>:$capacity
  );
  let results = (outs VMoE_FloatTensor:$buffers, VMoE_I32Tensor:$slots);
  let assemblyFormat = [{
    $x `,` $expert_ids (`,` $order^)? (`capacity` `(` $runtime_capacity^ `)`)?
    (`valid` `(` $num_valid^ `)`)?
    attr-dict `:` type($x) `,` type($expert_ids) (`,` type($order)^)?
    `->` type($buffers) `,` type($slots)
  }];
  let extraClassDeclaration = [{
    /// Number of experts E (static by dispatch-C4).
    int64_t getNumExperts();
    /// Choices per token k.
    int64_t getNumChoices();
    /// The static capacity this op implies: the `capacity` attribute, else the
    /// sized `capacity_ratio` when S is static; std::nullopt otherwise.
    std::optional<int64_t> getStaticCapacity();
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// ExpertFFNOp
//===----------------------------------------------------------------------===//

def VMoE_ExpertFFNOp : VMoE_Op<"expert_ffn", [Pure,
    AllTypesMatch<["buffers", "output"]>,
    AllElementTypesMatch<["buffers", "w1", "b1", "w2", "b2"]>]> {
  let summary = "Apply each expert's two-layer MLP to its buffer";
  let description = [{
    `output[e] = act(buffers[e] . w1[e] + b1[e]) . w2[e] + b2[e]` for every
    expert e and every row of its `G x B` buffer. `activation` is
    `gelu_tanh` (default, the Flax/V-MoE expert), `gelu_erf`, `relu` or
    `silu`. Rows of unfilled slots are don't-care.

    Rules: expert_ffn-C1 (buffers `E x G x B x D`), expert_ffn-C2 (w1
    `E x D x H`), expert_ffn-C3 (b1 `E x H`), expert_ffn-C4 (w2 `E x H x D`),
    expert_ffn-C5 (b2 `E x D`), expert_ffn-C6 (one element type).

    ```mlir
    %y = vmoe.expert_ffn %buffers, %w1, %b1, %w2, %b2
        {activation = #vmoe.activation<gelu_tanh>}
        : tensor<32x2x26x512xf32>, tensor<32x512x2048xf32>,
          tensor<32x2048xf32>, tensor<32x2048x512xf32>, tensor<32x512xf32>
    ```
  }];
  let arguments = (ins
    VMoE_FloatTensor:$buffers,
    VMoE_FloatTensor:$w1,
    VMoE_FloatTensor:$b1,
    VMoE_FloatTensor:$w2,
    VMoE_FloatTensor:$b2,
    DefaultValuedAttr<VMoE_ActivationAttr, "Activation::gelu_tanh">:$activation
  );
  let results = (outs VMoE_FloatTensor:$output);
  let assemblyFormat = [{
    $buffers `,` $w1 `,` $b1 `,` $w2 `,` $b2 attr-dict
    `:` type($buffers) `,` type($w1) `,` type($b1) `,` type($w2) `,` type($b2)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// CombineOp
//===----------------------------------------------------------------------===//

def VMoE_CombineOp : VMoE_Op<"combine", [Pure,
    AllElementTypesMatch<["expert_outputs", "weights", "output"]>]> {
  let summary = "Gate-weighted sum of each token's expert outputs";
  let description = [{
    `output[g, t] = sum over i in 0..k-1 with slots[g, t, i] >= 0 of
    weights[g, t, i] * expert_outputs[expert_ids[g, t, i], g, slots[g, t, i]]`,
    added in choice order. A token dropped by all its experts gets 0 (the
    block's residual carries it).

    Rules: combine-C1 (expert_outputs `E x G x B x D`), combine-C2
    (expert_ids `G x S x k` with G of expert_outputs), combine-C3 (slots and
    weights shape of expert_ids), combine-C4 (`k <= E`), combine-C5 (output
    `G x S x D`), combine-C6 (one float element type).

    ```mlir
    %out = vmoe.combine %y, %ids, %slots, %weights
        : tensor<32x2x26x512xf32>, tensor<2x400x2xi32>, tensor<2x400x2xi32>,
          tensor<2x400x2xf32> -> tensor<2x400x512xf32>
    ```
  }];
  let arguments = (ins
    VMoE_FloatTensor:$expert_outputs,
    VMoE_I32Tensor:$expert_ids,
    VMoE_I32Tensor:$slots,
    VMoE_FloatTensor:$weights
  );
  let results = (outs VMoE_FloatTensor:$output);
  let assemblyFormat = [{
    $expert_outputs `,` $expert_ids `,` $slots `,` $weights attr-dict
    `:` type($expert_outputs) `,` type($expert_ids) `,` type($slots) `,`
        type($weights) `->` type($output)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// AssignSlotsOp
//===----------------------------------------------------------------------===//

def VMoE_AssignSlotsOp : VMoE_Op<"assign_slots", [Pure,
    AttrSizedOperandSegments]> {
  let summary = "Dispatch planning: slots and per-expert slot tables, no copy";
  let description = [{
    The routing half of `vmoe.dispatch`: the same choice-by-choice
    assignment in priority order (`order`, or token order), with the
    capacity B of the `slot_entries` type (`E x G x B`) lowered at run time
    by the optional `capacity` operand, tokens masked out by the optional
    `valid` operand and expert ids outside `[0, E)` left out as in
    dispatch, but no token rows are copied.
    Results: `slots` (as dispatch: the slot of each choice, -1 when
    dropped), `slot_entries[e, g, s] = t * k + i` for the choice i of token t
    held by slot s of expert e (-1 for an unfilled slot), and `fill[e, g]`,
    the filled slots. `vmoe-fuse-experts` creates it from a dispatch whose
    buffers only feed a fused expert computation.

    Rules: assign_slots-C1 (expert_ids `G x S x k`), assign_slots-C2 (order
    `G x S`), assign_slots-C3 (slots shape of expert_ids), assign_slots-C4
    (slot_entries `E x G x B` with static E, B >= 1, k <= E), assign_slots-C5
    (fill `E x G`), assign_slots-C6 (`valid` is an index).

    ```mlir
    %slots, %entries, %fill = vmoe.assign_slots %ids, %order
        : tensor<1x400x2xi32>, tensor<1x400xi32>
        -> tensor<1x400x2xi32>, tensor<32x1x26xi32>, tensor<32x1xi32>
    ```
  }];
  let arguments = (ins
    VMoE_I32Tensor:$expert_ids,
    Optional<VMoE_I32Tensor>:$order,
    Optional<Index>:$runtime_capacity,
    Optional<Index>:$num_valid
  );
  let results = (outs
    VMoE_I32Tensor:$slots,
    VMoE_I32Tensor:$slot_entries,
    VMoE_I32Tensor:$fill
  );
  let assemblyFormat = [{
    $expert_ids (`,` $order^)? (`capacity` `(` $runtime_capacity^ `)`)?
    (`valid` `(` $num_valid^ `)`)?
    attr-dict `:` type($expert_ids) (`,` type($order)^)?
    `->` type($slots) `,` type($slot_entries) `,` type($fill)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// FusedExpertsOp
//===----------------------------------------------------------------------===//

def VMoE_FusedExpertsOp : VMoE_Op<"fused_experts", [Pure,
    AllElementTypesMatch<["x", "weights", "w1", "b1", "w2", "b2", "output"]>,
    AllTypesMatch<["x", "output"]>]> {
  let summary = "Gather, expert MLP and weighted combine in one computation";
  let description = [{
    `dispatch -> expert_ffn -> combine` without the `E x G x B x D` buffers:
    for every expert e and group g, the `fill[e, g]` filled slots of
    `slot_entries` name the rows `x[g, t]` (entry `t * k + i`); the expert
    MLP `act(row . w1[e] + b1[e]) . w2[e] + b2[e]` runs on those rows only,
    and the result, times `weights[g, t, i]`, goes to choice i of token t.
    Then `output[g, t]` adds the choices with `slots[g, t, i] >= 0` in
    choice order, exactly as `vmoe.combine` does; a token dropped by all its
    experts gets 0. Unfilled slots cost nothing.

    With `weight_panels = L`, w1 and w2 come in the panel layout of
    `vmoe.unpack_panels` (constant weights packed once, at model load):
    w1 is `E x ceil(H/L) x D x L` and w2 `E x ceil(D/L) x H x L`, with
    `w1[e, n / L, k, n % L]` the plain `w1[e, k, n]` (zeros past H), and
    the CPU lowering reads the panels in place instead of repacking the
    weights on every call. `vmoe-fuse-experts` sets it when both weights
    come from `vmoe.unpack_panels`.

    With `weight_storage = #vmoe.panel_storage<bf16_pairs>` (and
    `weight_panels = L`) the panels hold bf16 weights, two per 32-bit word
    as in `vmoe.unpack_panels`: w1 is `E x ceil(H/L) x ceil(D/2) x L`, w2
    `E x ceil(D/L) x ceil(H/2) x L`. The GEMMs then multiply bf16 weights by
    the rows rounded to bf16 (round to nearest even) and accumulate in f32
    (`vdpbf16ps` where the target has AVX512_BF16, else a 16-bit shift and
    an f32 fma per product: every product is exact in f32); biases,
    activation and the combine stay f32.

    With `gated(%w_up)` the expert is the SwiGLU of `vmoe.expert_swiglu`
    (fused from `dispatch -> expert_swiglu -> combine`):
    `(act(row . w1[e] + b1[e]) * (row . w_up[e])) . w2[e] + b2[e]`, `w1`
    the gate weights, `w2` the down weights, zero biases, act = silu.

    Rules: fused_experts-C1 (x `G x S x D`), fused_experts-C2 (slots and
    weights `G x S x k`), fused_experts-C3 (slot_entries `E x G x B`, fill
    `E x G`), fused_experts-C4 (w1 `E x D x H`, b1 `E x H`, w2 `E x H x D`,
    b2 `E x D`), fused_experts-C5 (with `weight_panels = L`: w1
    `E x ceil(H/L) x D x L`, w2 `E x ceil(D/L) x H x L`, H from b1; with
    bf16_pairs D and H become ceil(D/2) and ceil(H/2)),
    fused_experts-C6 (w_up `E x D x H`, the element type of x),
    fused_experts-C7 (`weight_storage` other than f32 needs
    `weight_panels`, f32 operands).

    ```mlir
    %out = vmoe.fused_experts %x, %slots, %weights, %entries, %fill,
                              %w1, %b1, %w2, %b2
        {activation = #vmoe.activation<gelu_tanh>}
        : tensor<1x400x512xf32>, tensor<1x400x2xi32>, tensor<1x400x2xf32>,
          tensor<32x1x26xi32>, tensor<32x1xi32>, tensor<32x512x2048xf32>,
          tensor<32x2048xf32>, tensor<32x2048x512xf32>, tensor<32x512xf32>
    ```
  }];
  let arguments = (ins
    VMoE_FloatTensor:$x,
    VMoE_I32Tensor:$slots,
    VMoE_FloatTensor:$weights,
    VMoE_I32Tensor:$slot_entries,
    VMoE_I32Tensor:$fill,
    VMoE_FloatTensor:$w1,
    VMoE_FloatTensor:$b1,
    VMoE_FloatTensor:$w2,
    VMoE_FloatTensor:$b2,
    Optional<VMoE_FloatTensor>:$w_up,
    DefaultValuedAttr<VMoE_ActivationAttr, "Activation::gelu_tanh">:$activation,
    OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$weight_panels,
    DefaultValuedAttr<VMoE_PanelStorageAttr,
                      "PanelStorage::f32">:$weight_storage
  );
  let results = (outs VMoE_FloatTensor:$output);
  let assemblyFormat = [{
    $x `,` $slots `,` $weights `,` $slot_entries `,` $fill `,` $w1 `,` $b1 `,`
    $w2 `,` $b2 (`gated` `(` $w_up^ `:` type($w_up) `)`)? attr-dict `:`
    type($x) `,` type($slots) `,` type($weights) `,`
    type($slot_entries) `,` type($fill) `,` type($w1) `,` type($b1) `,`
    type($w2) `,` type($b2)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// FusedRouteOp
//===----------------------------------------------------------------------===//

def VMoE_FusedRouteOp : VMoE_Op<"fused_route", [Pure,
    AttrSizedOperandSegments]> {
  let summary = "Routing, BPR order and slot assignment, group by group";
  let description = [{
    `route -> bpr_sort -> assign_slots` for one routing group at a time: the
    gates, priority scores and order of a group live only while that group
    is routed (no `G x S x E` gates tensor), and groups are independent.
    The attributes are those of `vmoe.route` (`k`, `normalize`, `order`);
    with `priority` present, tokens are placed in BPR order with that score
    (`score_k` as `k` of bpr_sort), otherwise in token order. The optional
    `capacity` operand lowers B (the dim of `slot_entries`) at run time; the
    optional `valid` operand masks tokens out as in dispatch.
    Results are those of route (expert ids, weights) and assign_slots
    (slots, slot entries, fill), bit for bit. Created by `vmoe-fuse-routing`.

    Rules: fused_route-C1 (x `G x S x D`, router `D x E`, `k <= E`),
    fused_route-C2 (expert_ids, weights, slots `G x S x k`), fused_route-C3
    (slot_entries `E x G x B` with static B >= 1, fill `E x G`),
    fused_route-C4 (`score_k` only with priority sum_topk, `<= E`),
    fused_route-C5 (`valid` is an index).

    ```mlir
    %ids, %w, %slots, %entries, %fill = vmoe.fused_route %x, %router
        {k = 2 : i64, priority = #vmoe.priority_score<max>}
        : tensor<1x400x512xf32>, tensor<512x32xf32>
        -> tensor<1x400x2xi32>, tensor<1x400x2xf32>, tensor<1x400x2xi32>,
           tensor<32x1x26xi32>, tensor<32x1xi32>
    ```
  }];
  let arguments = (ins
    VMoE_FloatTensor:$x,
    VMoE_FloatTensor:$router,
    Optional<Index>:$runtime_capacity,
    Optional<Index>:$num_valid,
    ConfinedAttr<I64Attr, [IntPositive]>:$k,
    DefaultValuedAttr<BoolAttr, "false">:$normalize,
    DefaultValuedAttr<VMoE_RouteOrderAttr, "RouteOrder::softmax_topk">:$order,
    OptionalAttr<VMoE_PriorityScoreAttr>:$priority,
    OptionalAttr<I64Attr>:$score_k
  );
  let results = (outs
    VMoE_I32Tensor:$expert_ids,
    VMoE_FloatTensor:$weights,
    VMoE_I32Tensor:$slots,
    VMoE_I32Tensor:$slot_entries,
    VMoE_I32Tensor:$fill
  );
  let assemblyFormat = [{
    $x `,` $router (`capacity` `(` $runtime_capacity^ `)`)?
    (`valid` `(` $num_valid^ `)`)? attr-dict
    `:` type($x) `,` type($router) `->` type(results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Other MoE families (SPEC §8): expert choice routing and Soft MoE.
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// ExpertChoiceOp
//===----------------------------------------------------------------------===//

def VMoE_ExpertChoiceOp : VMoE_Op<"expert_choice", [Pure,
    AttrSizedOperandSegments, AllElementTypesMatch<["x", "router", "gates"]>]> {
  let summary = "Expert choice routing: each expert takes its top-B tokens";
  let description = [{
    `gates = softmax(x . router)` over the E experts of every token, exactly
    as `vmoe.route` computes them. Then, per group g and expert e
    independently, the expert takes the `b` tokens with the largest
    `gates[g, :, e]`, in descending order (equal gates: the lower token
    index first; NaN gates are never taken), where
    `b = min(B, S, capacity operand)` and B is dim 2 of `token_ids`
    (`E x G x B`, sized as `rule(S * C / E)` by the caller: SPEC §8, the
    capacity rule of §4 without k; `vmoe.capacity` with `k = 1` gives it at
    run time). A token may be taken by several experts or by none.

    The optional index operand `valid(%n)` masks tokens out as in
    `vmoe.dispatch`: token t of group g is a candidate only if
    `g * S + t < n`, so padding images never take an expert's capacity
    (an expert with fewer than b candidates leaves its last slots empty).

    Results: `gates`; `token_ids[e, g, s]`, the token in slot s of expert e
    (-1 for `s >= b` or when no candidate is left); `slots[g, t, e]`, the
    slot of token t at expert e (-1 when e did not take t).
    `vmoe.expert_choice_experts` consumes them.

    Rules: expert_choice-C1 (x `G x S x D`, router `D x E`),
    expert_choice-C2 (gates `G x S x E`), expert_choice-C3 (token_ids
    `E x G x B` with static E and B >= 1), expert_choice-C4 (slots
    `G x S x E`), expert_choice-C5 (one float element type for x, router,
    gates), expert_choice-C6 (`valid` is an index).

    ```mlir
    %gates, %tokens, %slots = vmoe.expert_choice %x, %router capacity(%b)
        : tensor<2x400x512xf32>, tensor<512x32xf32>
        -> tensor<2x400x32xf32>, tensor<32x2x25xi32>, tensor<2x400x32xi32>
    ```
  }];
  let arguments = (ins
    VMoE_FloatTensor:$x,
    VMoE_FloatTensor:$router,
    Optional<Index>:$runtime_capacity,
    Optional<Index>:$num_valid
  );
  let results = (outs
    VMoE_FloatTensor:$gates,
    VMoE_I32Tensor:$token_ids,
    VMoE_I32Tensor:$slots
  );
  let assemblyFormat = [{
    $x `,` $router (`capacity` `(` $runtime_capacity^ `)`)?
    (`valid` `(` $num_valid^ `)`)? attr-dict
    `:` type($x) `,` type($router)
    `->` type($gates) `,` type($token_ids) `,` type($slots)
  }];
  let builders = [
    OpBuilder<(ins "Value":$x, "Value":$router, "int64_t":$capacity,
                   CArg<"Value", "Value()">:$runtime_capacity,
                   CArg<"Value", "Value()">:$num_valid)>
  ];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// ExpertChoiceExpertsOp
//===----------------------------------------------------------------------===//

def VMoE_ExpertChoiceExpertsOp : VMoE_Op<"expert_choice_experts", [Pure,
    AllTypesMatch<["x", "output"]>,
    AllElementTypesMatch<["x", "gates", "w1", "b1", "w2", "b2"]>]> {
  let summary = "Expert MLPs on the tokens each expert took, gate-weighted sum";
  let description = [{
    The compute half of expert choice routing: for every expert e, group g
    and filled slot s (`token_ids[e, g, s] = t >= 0`), the expert MLP
    `y_e(x[g, t]) = act(x[g, t] . w1[e] + b1[e]) . w2[e] + b2[e]` runs on
    that token only (unfilled slots cost nothing). Then

    `output[g, t] = sum over e ascending with slots[g, t, e] >= 0 of
    gates[g, t, e] * y_e(x[g, t])`,

    a product per expert, added from expert 0 up; a token taken by no expert
    gets 0 (the block's residual carries it). `token_ids` and `slots` must
    describe the same assignment, as `vmoe.expert_choice` returns them.

    With `weight_panels = L`, w1 and w2 come in the panel layout of
    `vmoe.unpack_panels` (constant weights packed once, at model load), as
    for `vmoe.fused_experts`: w1 is `E x ceil(H/L) x D x L` and w2
    `E x ceil(D/L) x H x L`, with `w1[e, n / L, k, n % L]` the plain
    `w1[e, k, n]`; the CPU lowering reads the panels in place instead of
    repacking every expert's weights on every call. `vmoe-fuse-experts`
    sets it when both weights come from `vmoe.unpack_panels` (f32 storage,
    one width).

    Rules: expert_choice_experts-C1 (x `G x S x D`; output has its type),
    expert_choice_experts-C2 (token_ids `E x G x B` with static E),
    expert_choice_experts-C3 (gates and slots `G x S x E`),
    expert_choice_experts-C4 (w1 `E x D x H`, b1 `E x H`, w2 `E x H x D`,
    b2 `E x D`), expert_choice_experts-C5 (one float element type),
    expert_choice_experts-C6 (with `weight_panels = L`: w1
    `E x ceil(H/L) x D x L`, w2 `E x ceil(D/L) x H x L`, H from b1).

    ```mlir
    %out = vmoe.expert_choice_experts %x, %gates, %tokens, %slots,
                                      %w1, %b1, %w2, %b2
        {activation = #vmoe.activation<gelu_tanh>}
        : tensor<2x400x512xf32>, tensor<2x400x32xf32>, tensor<32x2x25xi32>,
          tensor<2x400x32xi32>, tensor<32x512x2048xf32>, tensor<32x2048xf32>,
          tensor<32x2048x512xf32>, tensor<32x512xf32>
    %packed = vmoe.expert_choice_experts %x, %gates, %tokens, %slots,
                                         %w1p, %b1, %w2p, %b2
        {activation = #vmoe.activation<gelu_tanh>, weight_panels = 16 : i64}
        : tensor<2x400x512xf32>, tensor<2x400x32xf32>, tensor<32x2x25xi32>,
          tensor<2x400x32xi32>, tensor<32x128x512x16xf32>,
          tensor<32x2048xf32>, tensor<32x32x2048x16xf32>, tensor<32x512xf32>
    ```
  }];
  let arguments = (ins
    VMoE_FloatTensor:$x,
    VMoE_FloatTensor:$gates,
    VMoE_I32Tensor:$token_ids,
    VMoE_I32Tensor:$slots,
    VMoE_FloatTensor:$w1,
    VMoE_FloatTensor:$b1,
    VMoE_FloatTensor:$w2,
    VMoE_FloatTensor:$b2,
    DefaultValuedAttr<VMoE_ActivationAttr, "Activation::gelu_tanh">:$activation,
    OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$weight_panels
  );
  let results = (outs VMoE_FloatTensor:$output);
  let assemblyFormat = [{
    $x `,` $gates `,` $token_ids `,` $slots `,` $w1 `,` $b1 `,` $w2 `,` $b2
    attr-dict `:` type($x) `,` type($gates) `,` type($token_ids) `,`
    type($slots) `,` type($w1) `,` type($b1) `,` type($w2) `,` type($b2)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// SoftMoEOp
//===----------------------------------------------------------------------===//

def VMoE_SoftMoEOp : VMoE_Op<"soft_moe", [Pure,
    AllTypesMatch<["x", "output"]>,
    AllElementTypesMatch<["x", "phi", "scale", "w1", "b1", "w2", "b2"]>]> {
  let summary = "Soft MoE: experts on soft slots, soft-combined back";
  let description = [{
    Soft MoE (Puigcerver et al. 2023; SPEC §8) for every group g of S
    tokens, with E experts of P slots each (`phi` is `D x E x P`):

    * `xn[g, m] = x[g, m] / sqrt(sum_d x[g, m, d]^2 + 1e-6)`,
      `phin[:, e, p] = phi[:, e, p] / sqrt(sum_d phi[d, e, p]^2 + 1e-6)`
      (each as a multiplication by the reciprocal square root); `scale`
      multiplies `xn` when it has fewer elements than `phin`
      (`G * S * D < D * E * P`), else `phin`;
    * `logits[g, m, e, p] = xn[g, m] . phin[:, e, p]`;
    * dispatch weights: softmax of the logits over the S tokens m, per slot;
      `slot_in[e, g, p] = sum_m dispatch[g, m, e, p] * x[g, m]`
      (the un-normalized x);
    * `slot_out[e, g, p] = act(slot_in . w1[e] + b1[e]) . w2[e] + b2[e]`;
    * combine weights: softmax of the logits over all `E * P` slots, per
      token; `output[g, m] = sum_(e, p) combine[g, m, e, p] *
      slot_out[e, g, p]`.

    No token is dropped. The optional index operand `valid(%n)` masks
    padding tokens (`g * S + m >= n`) out of the dispatch softmax: the
    slots of group g mix only its valid tokens (a group without valid
    tokens gets zero slot inputs), so padding never changes the outputs of
    valid tokens; combine is computed for every token.

    The CPU lowering stores the `S x E*P` logits of a
    group (their GEMM's output) and computes the dispatch and combine
    weights while packing the operands of the slot GEMMs, never storing
    them.

    With `weight_panels = L`, w1 and w2 come in the panel layout of
    `vmoe.unpack_panels` (w1 `E x ceil(H/L) x D x L`, w2
    `E x ceil(D/L) x H x L`, packed once at model load) and the expert
    GEMMs read them in place, as `vmoe.expert_choice_experts` does;
    `vmoe-fuse-experts` sets it when both weights come from
    `vmoe.unpack_panels`.

    Rules: soft_moe-C1 (x `G x S x D`; output has its type), soft_moe-C2
    (phi `D x E x P` with D of x), soft_moe-C3 (scale is a 0-d tensor),
    soft_moe-C4 (w1 `E x D x H`, b1 `E x H`, w2 `E x H x D`, b2 `E x D` with
    E of phi), soft_moe-C5 (one float element type), soft_moe-C6 (`valid`
    is an index), soft_moe-C7 (with `weight_panels = L`: w1
    `E x ceil(H/L) x D x L`, w2 `E x ceil(D/L) x H x L`, H from b1).

    ```mlir
    %out = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
        {activation = #vmoe.activation<gelu_tanh>}
        : tensor<8x197x768xf32>, tensor<768x128x1xf32>, tensor<f32>,
          tensor<128x768x3072xf32>, tensor<128x3072xf32>,
          tensor<128x3072x768xf32>, tensor<128x768xf32>
    %packed = vmoe.soft_moe %x, %phi, %scale, %w1p, %b1, %w2p, %b2
        {activation = #vmoe.activation<gelu_tanh>, weight_panels = 16 : i64}
        : tensor<8x197x768xf32>, tensor<768x128x1xf32>, tensor<f32>,
          tensor<128x192x768x16xf32>, tensor<128x3072xf32>,
          tensor<128x48x3072x16xf32>, tensor<128x768xf32>
    ```
  }];
  let arguments = (ins
    VMoE_FloatTensor:$x,
    VMoE_FloatTensor:$phi,
    0DTensorOf<[AnyFloat]>:$scale,
    VMoE_FloatTensor:$w1,
    VMoE_FloatTensor:$b1,
    VMoE_FloatTensor:$w2,
    VMoE_FloatTensor:$b2,
    Optional<Index>:$num_valid,
    DefaultValuedAttr<VMoE_ActivationAttr, "Activation::gelu_tanh">:$activation,
    OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$weight_panels
  );
  let results = (outs VMoE_FloatTensor:$output);
  let assemblyFormat = [{
    $x `,` $phi `,` $scale `,` $w1 `,` $b1 `,` $w2 `,` $b2
    (`valid` `(` $num_valid^ `)`)? attr-dict
    `:` type($x) `,` type($phi) `,` type($scale) `,` type($w1) `,`
    type($b1) `,` type($w2) `,` type($b2)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Expert parallelism (docs/Distributed.md): ExpertShardOp, ExchangeDispatchOp,
// ExchangeCombineOp
//===----------------------------------------------------------------------===//

def VMoE_ExpertShardOp : VMoE_Op<"expert_shard", [Pure,
    AllElementTypesMatch<["experts", "shard"]>]> {
  let summary = "The experts of this process's rank (expert parallelism)";
  let description = [{
    With the E experts of a layer split over `ranks` processes (SPEC §10),
    rank r owns the experts `r * E / ranks ... (r + 1) * E / ranks - 1`:
    `shard[j, ...] = experts[r * E / ranks + j, ...]`. The rank is a
    constant of the running process (its MPI rank), which keeps the op
    pure. Created by `vmoe-expert-parallel` on the weights of
    `vmoe.expert_ffn`.

    Rules: expert_shard-C1 (experts has rank >= 1, static dim 0 E divisible
    by `ranks`), expert_shard-C2 (shard is `E / ranks x ...` with the other
    dims of experts).

    ```mlir
    %w1r = vmoe.expert_shard %w1 {ranks = 2 : i64}
        : tensor<8x10x512xf32> -> tensor<4x10x512xf32>
    ```
  }];
  let arguments = (ins
    VMoE_FloatTensor:$experts,
    ConfinedAttr<I64Attr, [IntPositive]>:$ranks
  );
  let results = (outs VMoE_FloatTensor:$shard);
  let assemblyFormat = "$experts attr-dict `:` type($experts) `->` type($shard)";
  let hasVerifier = 1;
}

class VMoE_ExchangeOp<string mnemonic> : VMoE_Op<mnemonic,
    [AllElementTypesMatch<["input", "output"]>]> {
  let arguments = (ins
    VMoE_FloatTensor:$input,
    VMoE_I32Tensor:$expert_ids,
    VMoE_I32Tensor:$slots,
    ConfinedAttr<I64Attr, [IntPositive]>:$ranks,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$layer
  );
  let results = (outs VMoE_FloatTensor:$output);
  let assemblyFormat = [{
    $input `,` $expert_ids `,` $slots attr-dict `:` type($input) `,`
    type($expert_ids) `,` type($slots) `->` type($output)
  }];
  let hasVerifier = 1;
}

def VMoE_ExchangeDispatchOp : VMoE_ExchangeOp<"exchange_dispatch"> {
  let summary = "All-to-all: dispatched rows to the ranks owning their experts";
  let description = [{
    Expert parallelism over `ranks` processes (SPEC §10), each holding G
    routing groups of its own tokens. `input` is this rank's
    `vmoe.dispatch` buffers (`E x G x B x D`); `expert_ids` and `slots`
    (`G x S x k`) are its routing, which tells how many rows of each
    (expert, group) are filled: `fill[e, g]` = the kept choices of group g
    with expert e. Every rank p sends the filled rows of the experts of
    rank q to q; the result holds the experts of this rank r for the groups
    of all ranks, in rank order:
    `output[j, p * G + g, b] = input_p[r * E / ranks + j, g, b]` for
    `b < fill_p[r * E / ranks + j, g]`, zero otherwise. It is a collective:
    every rank executes the same exchanges in the same order, so the op has
    side effects (never erased, moved or merged). `layer` numbers the MoE
    layer in the per-rank communication report.

    Rules: exchange-C1 (input rank 4 with static E divisible by `ranks`),
    exchange-C2 (expert_ids and slots `G x S x k` with G of the tokens'
    side), exchange-C3 (output `E / ranks x ranks * G x B x D`).

    ```mlir
    %rows = vmoe.exchange_dispatch %buffers, %ids, %slots
        {layer = 0 : i64, ranks = 2 : i64}
        : tensor<8x1x4x10xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32>
        -> tensor<4x2x4x10xf32>
    ```
  }];
}

def VMoE_ExchangeCombineOp : VMoE_ExchangeOp<"exchange_combine"> {
  let summary = "All-to-all: expert outputs back to the ranks owning the tokens";
  let description = [{
    The inverse of `vmoe.exchange_dispatch`: `input` is the
    `E / ranks x ranks * G x B x D` output of this rank's experts for the
    groups of all ranks; every filled row goes back to the rank of its
    group. `output[e, g, b]` (`E x G x B x D`) is the row the owner of
    expert e computed for row b of group g of this rank, for
    `b < fill[e, g]` (from this rank's `expert_ids` and `slots`), zero
    otherwise. A collective with side effects, like exchange_dispatch.

    Rules: exchange-C1 (output rank 4 with static E divisible by `ranks`),
    exchange-C2 (expert_ids and slots `G x S x k` with G of the output),
    exchange-C3 (input `E / ranks x ranks * G x B x D`).

    ```mlir
    %y = vmoe.exchange_combine %out, %ids, %slots
        {layer = 0 : i64, ranks = 2 : i64}
        : tensor<4x2x4x10xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32>
        -> tensor<8x1x4x10xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// UnpackPanelsOp
//===----------------------------------------------------------------------===//

def VMoE_UnpackPanelsOp : VMoE_Op<"unpack_panels", [Pure,
    AllElementTypesMatch<["panels", "result"]>]> {
  let summary = "Plain weights from weights stored in GEMM panel layout";
  let description = [{
    `result[..., k, n] = panels[..., n / L, k, n % L]` where L is the last
    dim of `panels` (the panel width): a `... x K x N` weight stored as
    `... x ceil(N/L) x K x L` column panels, each `K x L` block contiguous,
    the last panel zero-padded past N. It is the layout the CPU GEMM
    microkernel streams its B operand in, so constant weights stored this
    way (packed once, at model load; docs/ModelFormat.md) need no repacking
    per call: `vmoe-fuse-experts` hands the panels of both expert weights
    straight to `vmoe.fused_experts` (`weight_panels = L`), and
    convert-vmoe-to-scf folds the op into the linalg contractions that read
    it as their B operand (dense layers and dense MLPs: the contraction
    reads `panels[..., n floordiv L, k, n mod L]` in place); elsewhere the
    op lowers to a transpose.

    With `storage = #vmoe.panel_storage<bf16_pairs>` each 32-bit word of
    the f32 panels holds two bf16 weights of consecutive k (the pairs
    `vdpbf16ps` multiplies): `panels[..., n / L, j, n % L]` has the bits of
    bf16 `w[..., 2j, n]` in its low 16 bits and of `w[..., 2j + 1, n]` in
    its high 16 bits (zero past K), so panels are `... x P x ceil(K/2) x L`
    and `result[..., k, n]` is the f32 value of that bf16 (its bits shifted
    left by 16). The runtime writes this layout from f32 weights at load
    (round to nearest even; docs/ModelFormat.md §5). `vmoe-fuse-experts`
    hands such expert panels to `vmoe.fused_experts` (`weight_storage`),
    and convert-vmoe-to-scf folds the op into plain multiply-add
    contractions that read it as B, through `panels[..., n floordiv L,
    k floordiv 2, n mod L]`, their body becoming the bf16 pair product
    (row value rounded to bf16, times the word's low or high half:
    vmoe/Codegen/BF16PairContraction.h).

    Rules: unpack_panels-C1 (panels rank >= 3, result rank one less, same
    leading dims and K), unpack_panels-C2 (`(P - 1) * L < N <= P * L` for P
    panels of width L), unpack_panels-C3 (with bf16_pairs: panels K is
    `ceil(K/2)`, f32 words).

    ```mlir
    %w1 = vmoe.unpack_panels %packed
        : tensor<32x128x512x16xf32> -> tensor<32x512x2048xf32>
    %w2 = vmoe.unpack_panels %pairs
        {storage = #vmoe.panel_storage<bf16_pairs>}
        : tensor<32x32x1024x16xf32> -> tensor<32x2048x512xf32>
    ```
  }];
  let arguments = (ins VMoE_FloatTensor:$panels,
                   DefaultValuedAttr<VMoE_PanelStorageAttr,
                                     "PanelStorage::f32">:$storage);
  let results = (outs VMoE_FloatTensor:$result);
  let assemblyFormat = [{
    $panels attr-dict `:` type($panels) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

def VMoE_AttentionOp : VMoE_Op<"attention", [Pure,
    TypesMatchWith<"result has q's shape in f32", "q", "result",
                   "::mlir::RankedTensorType::get("
                   "::llvm::cast<::mlir::RankedTensorType>($_self).getShape(), "
                   "::mlir::Float32Type::get($_self.getContext()))">,
    AllElementTypesMatch<["q", "k", "v"]>]> {
  let summary = "Multi-head scaled dot-product attention, heads as a dim";
  let description = [{
    The self-attention of a ViT block between its qkv and output
    projections, on q `N x Tq x H x dh` and k, v `N x T x H x dh` (N images,
    T tokens, H heads of dh channels; Tq = T, or 1 for the class tokens'
    queries of a `token` head's last block):

    ```
    s[n, h, i, j] = (sum_c q[n, i, h, c] k[n, j, h, c]) / sqrt(dh)
    p[n, h, i, :] = softmax(s[n, h, i, :])
    result[n, i, h, c] = sum_j p[n, h, i, j] v[n, j, h, c]
    ```

    With `bf16_products` both products multiply operands rounded to bf16
    (nearest even) and sum in f32; the scale and the softmax stay f32
    (`--precision=bf16`). convert-vmoe-to-scf lowers that form to one
    parallel loop over (n, h) whose body keeps an item on the stack: q's
    rows and kᵀ rounded to bf16 pairs, the pair GEMM q·kᵀ with the scale in
    its epilogue, the softmax of each row, rounded straight to the pairs of
    the second GEMM's A, v's pair panels and p·v stored into the result
    (no scores or probabilities tensors, one parallel region instead of
    six). Without `bf16_products` it lowers to linalg.generic
    contractions, the kᵀ copy and the softmax (vmoe-vectorize-contractions
    runs the contractions on the GEMM microkernel). With `bf16_products` q,
    k and v may also come as bf16 (already rounded: the qkv projection's
    epilogue rounds them with `--precision=bf16`); the fused loop then
    reads their pairs as they are. The result is f32 either way.

    Rules: attention-C1 (q, k, v of rank 4, static shapes, f32, or bf16
    with `bf16_products`), attention-C2 (k and v of one shape), attention-C3
    (q has k's N, H and dh).

    ```mlir
    %ctx = vmoe.attention %q, %k, %v {bf16_products}
        : tensor<8x50x8x64xf32>, tensor<8x50x8x64xf32>, tensor<8x50x8x64xf32>
    %ctx2 = vmoe.attention %qb, %kb, %vb {bf16_products}
        : tensor<8x1x8x64xbf16>, tensor<8x50x8x64xbf16>, tensor<8x50x8x64xbf16>
    ```
  }];
  let arguments = (ins VMoE_FloatTensor:$q, VMoE_FloatTensor:$k,
                   VMoE_FloatTensor:$v, UnitAttr:$bf16_products);
  let results = (outs VMoE_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v attr-dict `:` type($q) `,` type($k) `,` type($v)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Auxiliary losses (SPEC §8)
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// RouterLossesOp
//===----------------------------------------------------------------------===//

def VMoE_RouterLossesOp : VMoE_Op<"router_losses", [Pure,
    AllElementTypesMatch<["x", "router"]>]> {
  let summary = "Auxiliary routing losses per group: importance, load, GShard";
  let description = [{
    The auxiliary losses of V-MoE (SPEC §8) for every group g, computed from
    the same router as `vmoe.route` with the same operands:
    `logits = x . router`; with `noise_std` (training graphs only) the
    caller passes the standard normal samples `noise` (`G x S x E`) that
    `vmoe.route` adds, `noisy = logits + noise * (noise_std / E)`, else
    `noisy = logits`; `gates = softmax(noisy)` over E.

    * `importance[g] = (std_e(I) / mean_e(I))^2` with
      `I[e] = sum_t gates[g, t, e]` (population std);
    * `load[g] = (std_e(L) / mean_e(L))^2` with
      `L[e] = mean_t (1 - Phi((thr[t] - logits[g, t, e]) / sigma))`,
      `sigma = noise_std / E`, `thr[t]` the k-th largest noisy logit of
      token t and `Phi` the standard normal CDF, computed in f32 as
      `1 - Phi(z) = erfc(z / sqrt(2)) / 2`. Without noise the load loss is
      not defined (V-MoE computes it only when noise is on): `load` is 0;
    * `gshard[g] = E^2 * mean_e(F[e] * M[e])` with `F[e]` the fraction of
      tokens whose argmax gate (lower expert index on ties) is e and
      `M[e] = mean_t gates[g, t, e]`.

    The results are f32 whatever the element type of x. They are values,
    not side effects: an inference graph that does not use them erases the
    op.

    Rules: router_losses-C1 (x `G x S x D`, router `D x E` with D of x),
    router_losses-C2 (`1 <= k <= E`), router_losses-C3 (noise iff
    noise_std, noise `G x S x E`, `noise_std > 0` and finite),
    router_losses-C4 (importance, load and gshard are `G` f32 tensors),
    router_losses-C5 (one float element type for x, router and noise).

    ```mlir
    %imp, %load, %gshard = vmoe.router_losses %x, %router
        noise(%noise : tensor<2x400x32xf32>) {k = 2 : i64, noise_std = 1.0}
        : tensor<2x400x512xf32>, tensor<512x32xf32>
        -> tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
    ```
  }];
  let arguments = (ins
    VMoE_FloatTensor:$x,
    VMoE_FloatTensor:$router,
    Optional<VMoE_FloatTensor>:$noise,
    ConfinedAttr<I64Attr, [IntPositive]>:$k,
    OptionalAttr<F64Attr>:$noise_std
  );
  let results = (outs
    RankedTensorOf<[F32]>:$importance,
    RankedTensorOf<[F32]>:$load,
    RankedTensorOf<[F32]>:$gshard
  );
  let assemblyFormat = [{
    $x `,` $router (`noise` `(` $noise^ `:` type($noise) `)`)? attr-dict
    `:` type($x) `,` type($router)
    `->` type($importance) `,` type($load) `,` type($gshard)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Decoder-style experts (SPEC §8)
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// ExpertSwiGLUOp
//===----------------------------------------------------------------------===//

def VMoE_ExpertSwiGLUOp : VMoE_Op<"expert_swiglu", [Pure,
    AllTypesMatch<["buffers", "output"]>,
    AllElementTypesMatch<["buffers", "w_gate", "w_up", "w_down"]>]> {
  let summary = "Apply each expert's SwiGLU MLP to its buffer";
  let description = [{
    The expert of decoder-style MoE blocks (Switch, Mixtral; SPEC §8):
    `output[e] = (silu(buffers[e] . w_gate[e]) * (buffers[e] . w_up[e]))
    . w_down[e]` for every expert e and every row of its `G x B` buffer,
    with `silu(v) = v / (1 + exp(-v))` and `*` elementwise. No biases (the
    Mixtral expert). Rows of unfilled slots are don't-care. It takes the
    place of `vmoe.expert_ffn` between `vmoe.dispatch` and `vmoe.combine`;
    a shared expert is the same op with E = 1 on `x` reshaped to
    `1 x G x S x D`.

    Rules: expert_swiglu-C1 (buffers `E x G x B x D`; output has its type),
    expert_swiglu-C2 (w_gate and w_up `E x D x H`), expert_swiglu-C3
    (w_down `E x H x D`), expert_swiglu-C4 (one float element type).

    ```mlir
    %y = vmoe.expert_swiglu %buffers, %w_gate, %w_up, %w_down
        : tensor<8x1x64x256xf32>, tensor<8x256x512xf32>,
          tensor<8x256x512xf32>, tensor<8x512x256xf32>
    ```
  }];
  let arguments = (ins
    VMoE_FloatTensor:$buffers,
    VMoE_FloatTensor:$w_gate,
    VMoE_FloatTensor:$w_up,
    VMoE_FloatTensor:$w_down
  );
  let results = (outs VMoE_FloatTensor:$output);
  let assemblyFormat = [{
    $buffers `,` $w_gate `,` $w_up `,` $w_down attr-dict
    `:` type($buffers) `,` type($w_gate) `,` type($w_up) `,` type($w_down)
  }];
  let hasVerifier = 1;
}

#endif // VMOE_DIALECT_VMOE_IR_VMOEOPS_TD
