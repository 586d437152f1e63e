// RUN: vmoe-opt %s -split-input-file -vmoe-fuse-routing | FileCheck %s

// route -> bpr_sort -> assign_slots becomes one fused_route with the
// router's attributes and the BPR score; users of the ids and weights read
// the fused results.
// CHECK-LABEL: func.func @fuse_bpr_sum_topk
// CHECK: %[[IDS:.*]], %[[W:.*]], %[[S:.*]], %[[E:.*]], %[[F:.*]] = vmoe.fused_route %{{.*}}, %{{.*}} capacity(%{{.*}}) {k = 2 : i64, normalize = true, priority = #vmoe.priority_score<sum_topk>, score_k = 2 : i64}
// CHECK-NOT: vmoe.route
// CHECK-NOT: vmoe.bpr_sort
// CHECK-NOT: vmoe.assign_slots
// CHECK: return %[[IDS]], %[[W]], %[[S]], %[[E]], %[[F]]
func.func @fuse_bpr_sum_topk(%x: tensor<1x16x8xf32>, %r: tensor<8x4xf32>, %b: index)
    -> (tensor<1x16x2xi32>, tensor<1x16x2xf32>, tensor<1x16x2xi32>, tensor<4x1x8xi32>, tensor<4x1xi32>) {
  %g, %ids, %w = vmoe.route %x, %r {k = 2 : i64, normalize = true}
      : tensor<1x16x8xf32>, tensor<8x4xf32> -> tensor<1x16x4xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>
  %o = vmoe.bpr_sort %g {score = #vmoe.priority_score<sum_topk>, k = 2 : i64} : tensor<1x16x4xf32> -> tensor<1x16xi32>
  %s, %e, %f = vmoe.assign_slots %ids, %o capacity(%b)
      : tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<1x16x2xi32>, tensor<4x1x8xi32>, tensor<4x1xi32>
  return %ids, %w, %s, %e, %f : tensor<1x16x2xi32>, tensor<1x16x2xf32>, tensor<1x16x2xi32>, tensor<4x1x8xi32>, tensor<4x1xi32>
}

// -----

// Vanilla routing: no priority.
// CHECK-LABEL: func.func @fuse_vanilla
// CHECK: vmoe.fused_route %{{.*}}, %{{.*}} {k = 1 : i64}
// CHECK-NOT: priority
func.func @fuse_vanilla(%x: tensor<2x16x8xf32>, %r: tensor<8x4xf32>) -> tensor<4x2x4xi32> {
  %g, %ids, %w = vmoe.route %x, %r {k = 1 : i64}
      : tensor<2x16x8xf32>, tensor<8x4xf32> -> tensor<2x16x4xf32>, tensor<2x16x1xi32>, tensor<2x16x1xf32>
  %s, %e, %f = vmoe.assign_slots %ids : tensor<2x16x1xi32> -> tensor<2x16x1xi32>, tensor<4x2x4xi32>, tensor<4x2xi32>
  return %e : tensor<4x2x4xi32>
}

// -----

/// The gates are also returned: fusing would drop them.
// CHECK-LABEL: func.func @negative_gates_escape
// CHECK: vmoe.route
// CHECK: vmoe.assign_slots
// CHECK-NOT: vmoe.fused_route
func.func @negative_gates_escape(%x: tensor<1x16x8xf32>, %r: tensor<8x4xf32>) -> (tensor<1x16x4xf32>, tensor<4x1x8xi32>) {
  %g, %ids, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x16x8xf32>, tensor<8x4xf32> -> tensor<1x16x4xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>
  %o = vmoe.bpr_sort %g : tensor<1x16x4xf32> -> tensor<1x16xi32>
  %s, %e, %f = vmoe.assign_slots %ids, %o : tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<1x16x2xi32>, tensor<4x1x8xi32>, tensor<4x1xi32>
  return %g, %e : tensor<1x16x4xf32>, tensor<4x1x8xi32>
}

// -----

/// A router with training noise stays unfused.
// CHECK-LABEL: func.func @negative_noise
// CHECK: vmoe.route
// CHECK-NOT: vmoe.fused_route
func.func @negative_noise(%x: tensor<1x16x8xf32>, %r: tensor<8x4xf32>, %n: tensor<1x16x4xf32>) -> tensor<4x1x8xi32> {
  %g, %ids, %w = vmoe.route %x, %r noise(%n : tensor<1x16x4xf32>) {k = 2 : i64, noise_std = 1.0 : f64}
      : tensor<1x16x8xf32>, tensor<8x4xf32> -> tensor<1x16x4xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>
  %s, %e, %f = vmoe.assign_slots %ids : tensor<1x16x2xi32> -> tensor<1x16x2xi32>, tensor<4x1x8xi32>, tensor<4x1xi32>
  return %e : tensor<4x1x8xi32>
}

// -----

/// The order comes from another tensor than the router's gates.
// CHECK-LABEL: func.func @negative_foreign_order
// CHECK: vmoe.bpr_sort
// CHECK-NOT: vmoe.fused_route
func.func @negative_foreign_order(%x: tensor<1x16x8xf32>, %r: tensor<8x4xf32>, %other: tensor<1x16x4xf32>) -> tensor<4x1x8xi32> {
  %g, %ids, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x16x8xf32>, tensor<8x4xf32> -> tensor<1x16x4xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>
  %o = vmoe.bpr_sort %other : tensor<1x16x4xf32> -> tensor<1x16xi32>
  %s, %e, %f = vmoe.assign_slots %ids, %o : tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<1x16x2xi32>, tensor<4x1x8xi32>, tensor<4x1xi32>
  return %e : tensor<4x1x8xi32>
}

// -----

// The mask of padding tokens moves from the assign_slots to the fused_route.
// CHECK-LABEL: func.func @fuse_masked_padding
// CHECK-SAME: %{{[a-z0-9]+}}: index, %[[N:[a-z0-9]+]]: index)
// CHECK: vmoe.fused_route %{{.*}}, %{{.*}} capacity(%{{.*}}) valid(%[[N]]) {k = 1 : i64, priority = #vmoe.priority_score<max>}
func.func @fuse_masked_padding(%x: tensor<2x16x8xf32>, %r: tensor<8x4xf32>, %b: index, %n: index)
    -> tensor<4x2xi32> {
  %g, %ids, %w = vmoe.route %x, %r {k = 1 : i64}
      : tensor<2x16x8xf32>, tensor<8x4xf32> -> tensor<2x16x4xf32>, tensor<2x16x1xi32>, tensor<2x16x1xf32>
  %o = vmoe.bpr_sort %g : tensor<2x16x4xf32> -> tensor<2x16xi32>
  %s, %e, %f = vmoe.assign_slots %ids, %o capacity(%b) valid(%n)
      : tensor<2x16x1xi32>, tensor<2x16xi32> -> tensor<2x16x1xi32>, tensor<4x2x4xi32>, tensor<4x2xi32>
  return %f : tensor<4x2xi32>
}

// -----

// The ids are read before the assign_slots (the repro of issue 9): the
// fused op goes at the route, so the early use reads its ids.
// CHECK-LABEL: func.func @fuse_early_use_of_ids
// CHECK: %[[IDS:.*]], %{{.*}}, %[[S:.*]], %{{.*}}, %{{.*}} = vmoe.fused_route
// CHECK-NEXT: %[[FIRST:.*]] = tensor.extract %[[IDS]]
// CHECK-NOT: vmoe.assign_slots
// CHECK: return %[[FIRST]], %[[S]]
func.func @fuse_early_use_of_ids(%x: tensor<1x4x2xf32>, %r: tensor<2x2xf32>) -> (i32, tensor<1x4x1xi32>) {
  %c0 = arith.constant 0 : index
  %gates, %ids, %w = vmoe.route %x, %r {k = 1 : i64}
      : tensor<1x4x2xf32>, tensor<2x2xf32> -> tensor<1x4x2xf32>, tensor<1x4x1xi32>, tensor<1x4x1xf32>
  %order = vmoe.bpr_sort %gates : tensor<1x4x2xf32> -> tensor<1x4xi32>
  %first = tensor.extract %ids[%c0, %c0, %c0] : tensor<1x4x1xi32>
  %s, %e, %f = vmoe.assign_slots %ids, %order
      : tensor<1x4x1xi32>, tensor<1x4xi32> -> tensor<1x4x1xi32>, tensor<2x1x2xi32>, tensor<2x1xi32>
  return %first, %s : i32, tensor<1x4x1xi32>
}

// -----

// One route feeds a vanilla and a BPR assign_slots, the vanilla one first:
// the BPR one is fused (at the route), the vanilla one reads the fused ids.
// CHECK-LABEL: func.func @fuse_route_feeding_vanilla_and_bpr
// CHECK: %[[IDS:.*]], %{{.*}}, %[[S:.*]], %{{.*}}, %{{.*}} = vmoe.fused_route %{{.*}}, %{{.*}} {k = 1 : i64, priority = #vmoe.priority_score<max>}
// CHECK-NEXT: %[[VS:.*]], %{{.*}}, %{{.*}} = vmoe.assign_slots %[[IDS]] :
// CHECK-NOT: vmoe.route
// CHECK: return %[[VS]], %[[S]]
func.func @fuse_route_feeding_vanilla_and_bpr(%x: tensor<1x4x2xf32>, %r: tensor<2x2xf32>)
    -> (tensor<1x4x1xi32>, tensor<1x4x1xi32>) {
  %gates, %ids, %w = vmoe.route %x, %r {k = 1 : i64}
      : tensor<1x4x2xf32>, tensor<2x2xf32> -> tensor<1x4x2xf32>, tensor<1x4x1xi32>, tensor<1x4x1xf32>
  %order = vmoe.bpr_sort %gates : tensor<1x4x2xf32> -> tensor<1x4xi32>
  %vs, %ve, %vf = vmoe.assign_slots %ids
      : tensor<1x4x1xi32> -> tensor<1x4x1xi32>, tensor<2x1x2xi32>, tensor<2x1xi32>
  %s, %e, %f = vmoe.assign_slots %ids, %order
      : tensor<1x4x1xi32>, tensor<1x4xi32> -> tensor<1x4x1xi32>, tensor<2x1x2xi32>, tensor<2x1xi32>
  return %vs, %s : tensor<1x4x1xi32>, tensor<1x4x1xi32>
}

// -----

// The capacity is computed after the route: the fused op goes at the
// assign_slots, where the capacity is available (no earlier use).
// CHECK-LABEL: func.func @fuse_capacity_after_route
// CHECK-NOT: vmoe.route
// CHECK: vmoe.capacity
// CHECK-NEXT: vmoe.fused_route %{{.*}}, %{{.*}} capacity(
func.func @fuse_capacity_after_route(%x: tensor<1x4x2xf32>, %r: tensor<2x2xf32>, %c: f64) -> tensor<1x4x1xi32> {
  %gates, %ids, %w = vmoe.route %x, %r {k = 1 : i64}
      : tensor<1x4x2xf32>, tensor<2x2xf32> -> tensor<1x4x2xf32>, tensor<1x4x1xi32>, tensor<1x4x1xf32>
  %b = vmoe.capacity %c {k = 1 : i64, num_experts = 2 : i64, tokens_per_group = 4 : i64, max_capacity = 2 : i64} : f64
  %s, %e, %f = vmoe.assign_slots %ids capacity(%b)
      : tensor<1x4x1xi32> -> tensor<1x4x1xi32>, tensor<2x1x2xi32>, tensor<2x1xi32>
  return %s : tensor<1x4x1xi32>
}

// -----

/// The capacity is computed after the route and the ids are read before
/// it: no place dominates both, so the rewrite is refused.
// CHECK-LABEL: func.func @negative_capacity_after_early_use
// CHECK: vmoe.route
// CHECK: vmoe.assign_slots
// CHECK-NOT: vmoe.fused_route
func.func @negative_capacity_after_early_use(%x: tensor<1x4x2xf32>, %r: tensor<2x2xf32>, %c: f64)
    -> (i32, tensor<1x4x1xi32>) {
  %c0 = arith.constant 0 : index
  %gates, %ids, %w = vmoe.route %x, %r {k = 1 : i64}
      : tensor<1x4x2xf32>, tensor<2x2xf32> -> tensor<1x4x2xf32>, tensor<1x4x1xi32>, tensor<1x4x1xf32>
  %first = tensor.extract %ids[%c0, %c0, %c0] : tensor<1x4x1xi32>
  %b = vmoe.capacity %c {k = 1 : i64, num_experts = 2 : i64, tokens_per_group = 4 : i64, max_capacity = 2 : i64} : f64
  %s, %e, %f = vmoe.assign_slots %ids capacity(%b)
      : tensor<1x4x1xi32> -> tensor<1x4x1xi32>, tensor<2x1x2xi32>, tensor<2x1xi32>
  return %first, %s : i32, tensor<1x4x1xi32>
}
