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
