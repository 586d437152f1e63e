// RUN: vmoe-opt %s -split-input-file | vmoe-opt -split-input-file | FileCheck %s
// RUN: vmoe-opt %s -split-input-file --mlir-print-op-generic | vmoe-opt -split-input-file | FileCheck %s

// Round trip of every vmoe op in its custom and generic forms.

// CHECK-LABEL: func.func @route_default
// CHECK: %[[G:.*]], %[[IDS:.*]], %[[W:.*]] = vmoe.route %{{.*}}, %{{.*}} {k = 2 : i64}
// CHECK-SAME: : tensor<2x400x512xf32>, tensor<512x32xf32> -> tensor<2x400x32xf32>, tensor<2x400x2xi32>, tensor<2x400x2xf32>
func.func @route_default(%x: tensor<2x400x512xf32>, %r: tensor<512x32xf32>)
    -> (tensor<2x400x32xf32>, tensor<2x400x2xi32>, tensor<2x400x2xf32>) {
  %g, %ids, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<2x400x512xf32>, tensor<512x32xf32>
      -> tensor<2x400x32xf32>, tensor<2x400x2xi32>, tensor<2x400x2xf32>
  return %g, %ids, %w : tensor<2x400x32xf32>, tensor<2x400x2xi32>, tensor<2x400x2xf32>
}

// -----

// CHECK-LABEL: func.func @route_topk_softmax_normalized_dynamic_tokens
// CHECK: vmoe.route %{{.*}}, %{{.*}} {k = 1 : i64, normalize = true, order = #vmoe.route_order<topk_softmax>}
// CHECK-SAME: tensor<?x?x64xf32>, tensor<64x8xf32> -> tensor<?x?x8xf32>, tensor<?x?x1xi32>, tensor<?x?x1xf32>
func.func @route_topk_softmax_normalized_dynamic_tokens(%x: tensor<?x?x64xf32>, %r: tensor<64x8xf32>)
    -> tensor<?x?x1xi32> {
  %g, %ids, %w = vmoe.route %x, %r {k = 1 : i64, normalize = true, order = #vmoe.route_order<topk_softmax>}
      : tensor<?x?x64xf32>, tensor<64x8xf32>
      -> tensor<?x?x8xf32>, tensor<?x?x1xi32>, tensor<?x?x1xf32>
  return %ids : tensor<?x?x1xi32>
}

// -----

// CHECK-LABEL: func.func @route_with_noise
// CHECK: vmoe.route %{{.*}}, %{{.*}} noise(%{{.*}} : tensor<1x8x4xf32>) {k = 2 : i64, noise_std = 1.000000e+00 : f64}
func.func @route_with_noise(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>, %n: tensor<1x8x4xf32>)
    -> tensor<1x8x2xi32> {
  %g, %ids, %w = vmoe.route %x, %r noise(%n : tensor<1x8x4xf32>) {k = 2 : i64, noise_std = 1.0 : f64}
      : tensor<1x8x16xf32>, tensor<16x4xf32>
      -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  return %ids : tensor<1x8x2xi32>
}

// -----

// CHECK-LABEL: func.func @route_bf16
// CHECK: vmoe.route {{.*}} : tensor<1x8x16xbf16>, tensor<16x4xbf16> -> tensor<1x8x4xbf16>, tensor<1x8x2xi32>, tensor<1x8x2xbf16>
func.func @route_bf16(%x: tensor<1x8x16xbf16>, %r: tensor<16x4xbf16>) -> tensor<1x8x2xi32> {
  %g, %ids, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x8x16xbf16>, tensor<16x4xbf16>
      -> tensor<1x8x4xbf16>, tensor<1x8x2xi32>, tensor<1x8x2xbf16>
  return %ids : tensor<1x8x2xi32>
}

// -----

// CHECK-LABEL: func.func @bpr_sort_max
// CHECK: vmoe.bpr_sort %{{.*}} : tensor<2x400x32xf32> -> tensor<2x400xi32>
func.func @bpr_sort_max(%g: tensor<2x400x32xf32>) -> tensor<2x400xi32> {
  %o = vmoe.bpr_sort %g : tensor<2x400x32xf32> -> tensor<2x400xi32>
  return %o : tensor<2x400xi32>
}

// -----

// CHECK-LABEL: func.func @bpr_sort_sum_topk
// CHECK: vmoe.bpr_sort %{{.*}} {k = 2 : i64, score = #vmoe.priority_score<sum_topk>} : tensor<2x400x32xf32> -> tensor<2x400xi32>
func.func @bpr_sort_sum_topk(%g: tensor<2x400x32xf32>) -> tensor<2x400xi32> {
  %o = vmoe.bpr_sort %g {score = #vmoe.priority_score<sum_topk>, k = 2 : i64}
      : tensor<2x400x32xf32> -> tensor<2x400xi32>
  return %o : tensor<2x400xi32>
}

// -----

// CHECK-LABEL: func.func @bpr_sort_weights_sum
// CHECK: vmoe.bpr_sort %{{.*}} {score = #vmoe.priority_score<sum_topk>} : tensor<1x?x2xf32> -> tensor<1x?xi32>
func.func @bpr_sort_weights_sum(%w: tensor<1x?x2xf32>) -> tensor<1x?xi32> {
  %o = vmoe.bpr_sort %w {score = #vmoe.priority_score<sum_topk>}
      : tensor<1x?x2xf32> -> tensor<1x?xi32>
  return %o : tensor<1x?xi32>
}

// -----

// CHECK-LABEL: func.func @capacity_runtime_ratio
// CHECK: vmoe.capacity %{{.*}} {capacity_rule = #vmoe.capacity_rule<ceil>, k = 2 : i64, max_capacity = 28 : i64, multiple_of = 4 : i64, num_experts = 32 : i64, tokens_per_group = 400 : i64} : f64
func.func @capacity_runtime_ratio(%c: f64) -> index {
  %b = vmoe.capacity %c {k = 2 : i64, num_experts = 32 : i64, tokens_per_group = 400 : i64,
                         max_capacity = 28 : i64, capacity_rule = #vmoe.capacity_rule<ceil>,
                         multiple_of = 4 : i64} : f64
  return %b : index
}

// -----

// CHECK-LABEL: func.func @dispatch_vanilla_dynamic_capacity
// CHECK: vmoe.dispatch %{{.*}}, %{{.*}} {capacity_ratio = 1.050000e+00 : f64}
// CHECK-SAME: : tensor<2x400x512xf32>, tensor<2x400x2xi32> -> tensor<32x2x?x512xf32>, tensor<2x400x2xi32>
func.func @dispatch_vanilla_dynamic_capacity(%x: tensor<2x400x512xf32>, %ids: tensor<2x400x2xi32>)
    -> tensor<32x2x?x512xf32> {
  %b, %s = vmoe.dispatch %x, %ids {capacity_ratio = 1.05 : f64}
      : tensor<2x400x512xf32>, tensor<2x400x2xi32> -> tensor<32x2x?x512xf32>, tensor<2x400x2xi32>
  return %b : tensor<32x2x?x512xf32>
}

// -----

// CHECK-LABEL: func.func @dispatch_bpr_static_capacity
// CHECK: vmoe.dispatch %{{.*}}, %{{.*}}, %{{.*}} {capacity = 26 : i64}
// CHECK-SAME: : tensor<2x400x512xf32>, tensor<2x400x2xi32>, tensor<2x400xi32> -> tensor<32x2x26x512xf32>, tensor<2x400x2xi32>
func.func @dispatch_bpr_static_capacity(%x: tensor<2x400x512xf32>, %ids: tensor<2x400x2xi32>,
                                        %o: tensor<2x400xi32>) -> tensor<32x2x26x512xf32> {
  %b, %s = vmoe.dispatch %x, %ids, %o {capacity = 26 : i64}
      : tensor<2x400x512xf32>, tensor<2x400x2xi32>, tensor<2x400xi32>
      -> tensor<32x2x26x512xf32>, tensor<2x400x2xi32>
  return %b : tensor<32x2x26x512xf32>
}

// -----

// CHECK-LABEL: func.func @dispatch_sized_ratio_ceil_multiple
// CHECK: vmoe.dispatch %{{.*}}, %{{.*}} {capacity_ratio = 1.000000e+00 : f64, capacity_rule = #vmoe.capacity_rule<ceil>, multiple_of = 4 : i64}
// CHECK-SAME: -> tensor<32x1x4x8xf32>, tensor<1x32x2xi32>
func.func @dispatch_sized_ratio_ceil_multiple(%x: tensor<1x32x8xf32>, %ids: tensor<1x32x2xi32>)
    -> tensor<32x1x4x8xf32> {
  %b, %s = vmoe.dispatch %x, %ids {capacity_ratio = 1.0 : f64, capacity_rule = #vmoe.capacity_rule<ceil>,
                                   multiple_of = 4 : i64}
      : tensor<1x32x8xf32>, tensor<1x32x2xi32> -> tensor<32x1x4x8xf32>, tensor<1x32x2xi32>
  return %b : tensor<32x1x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @dispatch_runtime_capacity
// CHECK: %[[B:.*]] = vmoe.capacity
// CHECK: vmoe.dispatch %{{.*}}, %{{.*}}, %{{.*}} capacity(%[[B]]) {capacity = 26 : i64}
func.func @dispatch_runtime_capacity(%x: tensor<2x400x512xf32>, %ids: tensor<2x400x2xi32>,
                                     %o: tensor<2x400xi32>, %c: f64) -> tensor<2x400x2xi32> {
  %cap = vmoe.capacity %c {k = 2 : i64, num_experts = 32 : i64, tokens_per_group = 400 : i64,
                           max_capacity = 26 : i64} : f64
  %b, %s = vmoe.dispatch %x, %ids, %o capacity(%cap) {capacity = 26 : i64}
      : tensor<2x400x512xf32>, tensor<2x400x2xi32>, tensor<2x400xi32>
      -> tensor<32x2x26x512xf32>, tensor<2x400x2xi32>
  return %s : tensor<2x400x2xi32>
}

// -----

// CHECK-LABEL: func.func @expert_ffn_default_activation
// CHECK: vmoe.expert_ffn %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<32x2x26x512xf32>, tensor<32x512x2048xf32>, tensor<32x2048xf32>, tensor<32x2048x512xf32>, tensor<32x512xf32>
func.func @expert_ffn_default_activation(%b: tensor<32x2x26x512xf32>, %w1: tensor<32x512x2048xf32>,
    %b1: tensor<32x2048xf32>, %w2: tensor<32x2048x512xf32>, %b2: tensor<32x512xf32>)
    -> tensor<32x2x26x512xf32> {
  %y = vmoe.expert_ffn %b, %w1, %b1, %w2, %b2
      : tensor<32x2x26x512xf32>, tensor<32x512x2048xf32>, tensor<32x2048xf32>,
        tensor<32x2048x512xf32>, tensor<32x512xf32>
  return %y : tensor<32x2x26x512xf32>
}

// -----

// CHECK-LABEL: func.func @expert_ffn_each_activation
// CHECK: vmoe.expert_ffn {{.*}} {activation = #vmoe.activation<gelu_erf>}
// CHECK: vmoe.expert_ffn {{.*}} {activation = #vmoe.activation<relu>}
// CHECK: vmoe.expert_ffn {{.*}} {activation = #vmoe.activation<silu>}
// CHECK-SAME: : tensor<4x1x?x8xf32>
func.func @expert_ffn_each_activation(%b: tensor<4x1x?x8xf32>, %w1: tensor<4x8x16xf32>,
    %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) -> tensor<4x1x?x8xf32> {
  %y0 = vmoe.expert_ffn %b, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<gelu_erf>}
      : tensor<4x1x?x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %y1 = vmoe.expert_ffn %y0, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<relu>}
      : tensor<4x1x?x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %y2 = vmoe.expert_ffn %y1, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<silu>}
      : tensor<4x1x?x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  return %y2 : tensor<4x1x?x8xf32>
}

// -----

// CHECK-LABEL: func.func @combine_static
// CHECK: vmoe.combine %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<32x2x26x512xf32>, tensor<2x400x2xi32>, tensor<2x400x2xi32>, tensor<2x400x2xf32> -> tensor<2x400x512xf32>
func.func @combine_static(%y: tensor<32x2x26x512xf32>, %ids: tensor<2x400x2xi32>,
                          %s: tensor<2x400x2xi32>, %w: tensor<2x400x2xf32>) -> tensor<2x400x512xf32> {
  %o = vmoe.combine %y, %ids, %s, %w
      : tensor<32x2x26x512xf32>, tensor<2x400x2xi32>, tensor<2x400x2xi32>, tensor<2x400x2xf32>
      -> tensor<2x400x512xf32>
  return %o : tensor<2x400x512xf32>
}

// -----

// The whole layer, as examples/moe_layer.mlir spells it.
// CHECK-LABEL: func.func @layer_bpr_top2
// CHECK: vmoe.route
// CHECK: vmoe.bpr_sort
// CHECK: vmoe.dispatch
// CHECK: vmoe.expert_ffn
// CHECK: vmoe.combine
func.func @layer_bpr_top2(%x: tensor<1x16x8xf32>, %r: tensor<8x4xf32>, %w1: tensor<4x8x16xf32>,
    %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) -> tensor<1x16x8xf32> {
  %g, %ids, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x16x8xf32>, tensor<8x4xf32> -> tensor<1x16x4xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>
  %o = vmoe.bpr_sort %g : tensor<1x16x4xf32> -> tensor<1x16xi32>
  %buf, %slots = vmoe.dispatch %x, %ids, %o {capacity_ratio = 1.0 : f64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<4x1x?x8xf32>, tensor<1x16x2xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<4x1x?x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x?x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xi32>, tensor<1x16x2xf32> -> tensor<1x16x8xf32>
  return %out : tensor<1x16x8xf32>
}

// -----

// CHECK-LABEL: func.func @assign_slots_bpr_runtime_capacity
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = vmoe.assign_slots %{{.*}}, %{{.*}} capacity(%{{.*}}) : tensor<1x400x2xi32>, tensor<1x400xi32> -> tensor<1x400x2xi32>, tensor<32x1x26xi32>, tensor<32x1xi32>
func.func @assign_slots_bpr_runtime_capacity(%ids: tensor<1x400x2xi32>, %o: tensor<1x400xi32>, %b: index)
    -> tensor<32x1x26xi32> {
  %s, %e, %f = vmoe.assign_slots %ids, %o capacity(%b)
      : tensor<1x400x2xi32>, tensor<1x400xi32> -> tensor<1x400x2xi32>, tensor<32x1x26xi32>, tensor<32x1xi32>
  return %e : tensor<32x1x26xi32>
}

// -----

// CHECK-LABEL: func.func @dispatch_masked_padding
// CHECK: vmoe.dispatch %{{.*}}, %{{.*}}, %{{.*}} valid(%{{.*}}) {capacity = 26 : i64}
// CHECK: vmoe.dispatch %{{.*}}, %{{.*}} capacity(%{{.*}}) valid(%{{.*}}) {capacity = 26 : i64}
func.func @dispatch_masked_padding(%x: tensor<2x400x512xf32>, %ids: tensor<2x400x2xi32>,
                                   %order: tensor<2x400xi32>, %n: index, %cap: index)
    -> (tensor<2x400x2xi32>, tensor<2x400x2xi32>) {
  %buffers2, %slots2 = vmoe.dispatch %x, %ids, %order valid(%n)
      {capacity = 26 : i64}
      : tensor<2x400x512xf32>, tensor<2x400x2xi32>, tensor<2x400xi32>
      -> tensor<32x2x26x512xf32>, tensor<2x400x2xi32>
  %b, %s = vmoe.dispatch %x, %ids capacity(%cap) valid(%n) {capacity = 26 : i64}
      : tensor<2x400x512xf32>, tensor<2x400x2xi32> -> tensor<32x2x26x512xf32>, tensor<2x400x2xi32>
  return %slots2, %s : tensor<2x400x2xi32>, tensor<2x400x2xi32>
}

// -----

// CHECK-LABEL: func.func @assign_slots_masked_padding
// CHECK: vmoe.assign_slots %{{.*}}, %{{.*}} capacity(%{{.*}}) valid(%{{.*}}) : tensor<1x400x2xi32>, tensor<1x400xi32>
// CHECK: vmoe.assign_slots %{{.*}} valid(%{{.*}}) : tensor<1x400x2xi32> ->
func.func @assign_slots_masked_padding(%ids: tensor<1x400x2xi32>, %o: tensor<1x400xi32>, %b: index,
                                       %n: index) -> (tensor<32x1x26xi32>, tensor<32x1x26xi32>) {
  %s, %e, %f = vmoe.assign_slots %ids, %o capacity(%b) valid(%n)
      : tensor<1x400x2xi32>, tensor<1x400xi32> -> tensor<1x400x2xi32>, tensor<32x1x26xi32>, tensor<32x1xi32>
  %s2, %e2, %f2 = vmoe.assign_slots %ids valid(%n)
      : tensor<1x400x2xi32> -> tensor<1x400x2xi32>, tensor<32x1x26xi32>, tensor<32x1xi32>
  return %e, %e2 : tensor<32x1x26xi32>, tensor<32x1x26xi32>
}

// -----

// CHECK-LABEL: func.func @assign_slots_vanilla
// CHECK: vmoe.assign_slots %{{.*}} : tensor<2x8x1xi32> -> tensor<2x8x1xi32>, tensor<4x2x2xi32>, tensor<4x2xi32>
func.func @assign_slots_vanilla(%ids: tensor<2x8x1xi32>) -> tensor<4x2xi32> {
  %s, %e, %f = vmoe.assign_slots %ids : tensor<2x8x1xi32> -> tensor<2x8x1xi32>, tensor<4x2x2xi32>, tensor<4x2xi32>
  return %f : tensor<4x2xi32>
}

// -----

// CHECK-LABEL: func.func @fused_experts
// CHECK: vmoe.fused_experts %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {activation = #vmoe.activation<silu>}
// CHECK-SAME: : tensor<1x400x512xf32>, tensor<1x400x2xi32>, tensor<1x400x2xf32>, tensor<32x1x26xi32>, tensor<32x1xi32>, tensor<32x512x2048xf32>, tensor<32x2048xf32>, tensor<32x2048x512xf32>, tensor<32x512xf32>
func.func @fused_experts(%x: tensor<1x400x512xf32>, %s: tensor<1x400x2xi32>, %w: tensor<1x400x2xf32>,
    %e: tensor<32x1x26xi32>, %f: tensor<32x1xi32>, %w1: tensor<32x512x2048xf32>, %b1: tensor<32x2048xf32>,
    %w2: tensor<32x2048x512xf32>, %b2: tensor<32x512xf32>) -> tensor<1x400x512xf32> {
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<silu>}
      : tensor<1x400x512xf32>, tensor<1x400x2xi32>, tensor<1x400x2xf32>, tensor<32x1x26xi32>, tensor<32x1xi32>,
        tensor<32x512x2048xf32>, tensor<32x2048xf32>, tensor<32x2048x512xf32>, tensor<32x512xf32>
  return %o : tensor<1x400x512xf32>
}

// -----

// CHECK-LABEL: func.func @fused_route_masked_padding
// CHECK: vmoe.fused_route %{{.*}}, %{{.*}} valid(%{{.*}}) {k = 1 : i64}
// CHECK: vmoe.fused_route %{{.*}}, %{{.*}} capacity(%{{.*}}) valid(%{{.*}}) {k = 1 : i64, priority = #vmoe.priority_score<max>}
func.func @fused_route_masked_padding(%x: tensor<2x8x16xf32>, %r: tensor<16x4xf32>, %b: index, %n: index)
    -> (tensor<4x2xi32>, tensor<4x2xi32>) {
  %ids, %w, %s, %e, %f = vmoe.fused_route %x, %r valid(%n) {k = 1 : i64}
      : tensor<2x8x16xf32>, tensor<16x4xf32>
      -> tensor<2x8x1xi32>, tensor<2x8x1xf32>, tensor<2x8x1xi32>, tensor<4x2x3xi32>, tensor<4x2xi32>
  %ids2, %w2, %s2, %e2, %f2 = vmoe.fused_route %x, %r capacity(%b) valid(%n)
      {k = 1 : i64, priority = #vmoe.priority_score<max>}
      : tensor<2x8x16xf32>, tensor<16x4xf32>
      -> tensor<2x8x1xi32>, tensor<2x8x1xf32>, tensor<2x8x1xi32>, tensor<4x2x3xi32>, tensor<4x2xi32>
  return %f, %f2 : tensor<4x2xi32>, tensor<4x2xi32>
}

// -----

// CHECK-LABEL: func.func @fused_route_bpr_sum
// CHECK: vmoe.fused_route %{{.*}}, %{{.*}} capacity(%{{.*}}) {k = 2 : i64, priority = #vmoe.priority_score<sum_topk>, score_k = 2 : i64}
// CHECK-SAME: : tensor<1x400x512xf32>, tensor<512x32xf32> -> tensor<1x400x2xi32>, tensor<1x400x2xf32>, tensor<1x400x2xi32>, tensor<32x1x26xi32>, tensor<32x1xi32>
func.func @fused_route_bpr_sum(%x: tensor<1x400x512xf32>, %r: tensor<512x32xf32>, %b: index) -> tensor<32x1xi32> {
  %ids, %w, %s, %e, %f = vmoe.fused_route %x, %r capacity(%b)
      {k = 2 : i64, priority = #vmoe.priority_score<sum_topk>, score_k = 2 : i64}
      : tensor<1x400x512xf32>, tensor<512x32xf32>
      -> tensor<1x400x2xi32>, tensor<1x400x2xf32>, tensor<1x400x2xi32>, tensor<32x1x26xi32>, tensor<32x1xi32>
  return %f : tensor<32x1xi32>
}

// -----

// CHECK-LABEL: func.func @fused_route_vanilla_topk_softmax
// CHECK: vmoe.fused_route %{{.*}}, %{{.*}} {k = 1 : i64, normalize = true, order = #vmoe.route_order<topk_softmax>}
func.func @fused_route_vanilla_topk_softmax(%x: tensor<2x8x16xf32>, %r: tensor<16x4xf32>) -> tensor<2x8x1xi32> {
  %ids, %w, %s, %e, %f = vmoe.fused_route %x, %r {k = 1 : i64, normalize = true, order = #vmoe.route_order<topk_softmax>}
      : tensor<2x8x16xf32>, tensor<16x4xf32>
      -> tensor<2x8x1xi32>, tensor<2x8x1xf32>, tensor<2x8x1xi32>, tensor<4x2x2xi32>, tensor<4x2xi32>
  return %ids : tensor<2x8x1xi32>
}

// -----

// CHECK-LABEL: func.func @attention_bf16
// CHECK: vmoe.attention %{{.*}}, %{{.*}}, %{{.*}} {bf16_products}
// CHECK-SAME: : tensor<8x50x8x64xf32>, tensor<8x50x8x64xf32>, tensor<8x50x8x64xf32>
func.func @attention_bf16(%q: tensor<8x50x8x64xf32>, %k: tensor<8x50x8x64xf32>, %v: tensor<8x50x8x64xf32>) -> tensor<8x50x8x64xf32> {
  %c = vmoe.attention %q, %k, %v {bf16_products}
      : tensor<8x50x8x64xf32>, tensor<8x50x8x64xf32>, tensor<8x50x8x64xf32>
  return %c : tensor<8x50x8x64xf32>
}

// -----

// q, k and v already rounded to bf16 (the qkv projection's epilogue); the
// result is f32 of q's shape.
// CHECK-LABEL: func.func @attention_bf16_operands
// CHECK: %[[C:.*]] = vmoe.attention %{{.*}}, %{{.*}}, %{{.*}} {bf16_products}
// CHECK-SAME: : tensor<8x1x8x64xbf16>, tensor<8x50x8x64xbf16>, tensor<8x50x8x64xbf16>
// CHECK: return %[[C]] : tensor<8x1x8x64xf32>
func.func @attention_bf16_operands(%q: tensor<8x1x8x64xbf16>, %k: tensor<8x50x8x64xbf16>, %v: tensor<8x50x8x64xbf16>) -> tensor<8x1x8x64xf32> {
  %c = vmoe.attention %q, %k, %v {bf16_products}
      : tensor<8x1x8x64xbf16>, tensor<8x50x8x64xbf16>, tensor<8x50x8x64xbf16>
  return %c : tensor<8x1x8x64xf32>
}

// -----

// CHECK-LABEL: func.func @attention_class_queries_f32
// CHECK: vmoe.attention %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK-SAME: tensor<2x1x3x40xf32>, tensor<2x17x3x40xf32>, tensor<2x17x3x40xf32>
func.func @attention_class_queries_f32(%q: tensor<2x1x3x40xf32>, %k: tensor<2x17x3x40xf32>, %v: tensor<2x17x3x40xf32>) -> tensor<2x1x3x40xf32> {
  %c = vmoe.attention %q, %k, %v
      : tensor<2x1x3x40xf32>, tensor<2x17x3x40xf32>, tensor<2x17x3x40xf32>
  return %c : tensor<2x1x3x40xf32>
}
