// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf | FileCheck %s

// The router: a contraction with the reduction outside the expert loop
// (marked vmoe.router_logits: the GPU path keeps it on FP32 products), a
// four-step softmax, then per-token top-k in an scf.forall: per choice one
// maximum over i64 order keys (the gate's bits ordered like the gate, -0
// as +0, above 2^32 - 1 - e), below the previous choice's key and not NaN,
// with a sentinel that is not the maximum's identity; the expert from the
// key's low half, its gate read back.
// CHECK-LABEL: func.func @route_softmax_topk
// CHECK-NOT: vmoe.route
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "parallel"]{{.*}}vmoe.router_logits
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: arith.divf
// CHECK: scf.forall (%{{.*}}, %{{.*}}) in (2, 8)
// CHECK:   %[[NONE:.*]] = arith.constant -9223372036854775807 : i64
// CHECK:   scf.for {{.*}} iter_args(%[[PREV:[^ ]*]] = %{{.*}}) -> (i64, tensor<2xi32>, tensor<2xf32>)
// CHECK:     scf.for {{.*}} iter_args(%[[ACC:[^ ]*]] = %[[NONE]]) -> (i64)
// CHECK:       %[[GATE:.*]] = tensor.extract
// CHECK:       %[[ZEROED:.*]] = arith.addf %[[GATE]], %{{.*}} : f32
// CHECK:       arith.bitcast %[[ZEROED]] : f32 to i32
// CHECK:       arith.xori
// CHECK:       %[[KEY:.*]] = arith.ori
// CHECK:       arith.cmpf ord, %[[GATE]], %[[GATE]]
// CHECK:       arith.cmpi slt, %[[KEY]], %[[PREV]]
// CHECK:       %[[CAND:.*]] = arith.select %{{.*}}, %[[KEY]], %[[NONE]]
// CHECK:       arith.maxsi %[[ACC]], %[[CAND]]
// CHECK:     %[[FOUND:.*]] = arith.cmpi ne, %[[BEST:.*]], %[[NONE]]
// CHECK:     scf.if %[[FOUND]] -> (f32)
// CHECK:       tensor.extract
// CHECK:     arith.select %[[FOUND]], %[[BEST]], %[[PREV]]
// CHECK:   tensor.parallel_insert_slice {{.*}} [1, 1, 2] [1, 1, 1] : tensor<2xi32> into tensor<2x8x2xi32>
func.func @route_softmax_topk(%x: tensor<2x8x16xf32>, %r: tensor<16x4xf32>)
    -> (tensor<2x8x4xf32>, tensor<2x8x2xi32>, tensor<2x8x2xf32>) {
  %g, %ids, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<2x8x16xf32>, tensor<16x4xf32> -> tensor<2x8x4xf32>, tensor<2x8x2xi32>, tensor<2x8x2xf32>
  return %g, %ids, %w : tensor<2x8x4xf32>, tensor<2x8x2xi32>, tensor<2x8x2xf32>
}

// -----

// Shazeer order: top-k over the logits, then a softmax and the
// normalization over the k chosen weights; noise is scaled by noise_std / E.
// CHECK-LABEL: func.func @route_topk_softmax_normalize_noise
// CHECK: arith.constant 2.500000e-01 : f32
// CHECK: scf.forall
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: arith.divf
func.func @route_topk_softmax_normalize_noise(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>,
    %n: tensor<1x8x4xf32>) -> tensor<1x8x2xf32> {
  %g, %ids, %w = vmoe.route %x, %r noise(%n : tensor<1x8x4xf32>)
      {k = 2 : i64, order = #vmoe.route_order<topk_softmax>, normalize = true, noise_std = 1.0 : f64}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  return %w : tensor<1x8x2xf32>
}

// -----

// BPR: a max score per token, its i64 order key (NaN ranked last: its
// high half INT32_MIN), then a stable rank count over the keys (one
// integer compare per pair) that writes order[g, rank] = t.
// CHECK-LABEL: func.func @bpr_sort_max
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.maximumf
// CHECK: %[[KEYS:.*]] = scf.forall (%{{.*}}, %{{.*}}) in (2, 8) {{.*}} -> (tensor<2x8xi64>)
// CHECK:   arith.bitcast %{{.*}} : f32 to i32
// CHECK:   arith.cmpf uno
// CHECK:   arith.select %{{.*}}, %c-2147483648_i32
// CHECK: scf.forall (%[[G:.*]], %[[T:.*]]) in (2, 8)
// CHECK:   %[[MINE:.*]] = tensor.extract %[[KEYS]][%[[G]], %[[T]]]
// CHECK:   %[[RANK:.*]] = scf.for
// CHECK:     %[[OTHER:.*]] = tensor.extract %[[KEYS]]
// CHECK:     arith.cmpi sgt, %[[OTHER]], %[[MINE]] : i64
// CHECK:   tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%[[G]], %[[RANK]]] [1, 1]
func.func @bpr_sort_max(%g: tensor<2x8x4xf32>) -> tensor<2x8xi32> {
  %o = vmoe.bpr_sort %g : tensor<2x8x4xf32> -> tensor<2x8xi32>
  return %o : tensor<2x8xi32>
}

// -----

// sum_topk: the score is the sum of the top-k, from the largest down.
// CHECK-LABEL: func.func @bpr_sort_sum_topk
// CHECK: scf.forall
// CHECK:   scf.for
// CHECK:     scf.for
// CHECK:     arith.addf
// CHECK: scf.forall
func.func @bpr_sort_sum_topk(%g: tensor<2x8x4xf32>) -> tensor<2x8xi32> {
  %o = vmoe.bpr_sort %g {score = #vmoe.priority_score<sum_topk>, k = 2 : i64}
      : tensor<2x8x4xf32> -> tensor<2x8xi32>
  return %o : tensor<2x8xi32>
}

// -----

// The capacity rule at run time: ((k * S) * C) / E, round half to even,
// clamped to the static maximum.
// CHECK-LABEL: func.func @capacity_round
// CHECK: arith.mulf
// CHECK: arith.divf
// CHECK: math.roundeven
// CHECK: arith.fptosi
// CHECK: arith.minsi
func.func @capacity_round(%c: f64) -> index {
  %b = vmoe.capacity %c {k = 2 : i64, num_experts = 32 : i64, tokens_per_group = 400 : i64,
                         max_capacity = 26 : i64} : f64
  return %b : index
}

// -----

// CHECK-LABEL: func.func @capacity_ceil_multiple_of
// CHECK: math.ceil
// CHECK: arith.ceildivsi
// CHECK: arith.muli
func.func @capacity_ceil_multiple_of(%c: f64) -> index {
  %b = vmoe.capacity %c {k = 2 : i64, num_experts = 32 : i64, tokens_per_group = 32 : i64,
                         max_capacity = 8 : i64, capacity_rule = #vmoe.capacity_rule<ceil>,
                         multiple_of = 4 : i64} : f64
  return %b : index
}

// -----

// Dispatch: zero buffers, then one forall iteration per group that walks
// choice i, then tokens in priority order, and copies kept rows.
// CHECK-LABEL: func.func @dispatch_bpr_runtime_capacity
// CHECK-SAME: %[[CAP:[a-z0-9]+]]: index
// CHECK: %[[LIMIT:.*]] = arith.minsi %[[CAP]], %{{.*}}
// CHECK: linalg.fill {{.*}} -> tensor<4x2x3x16xf32>
// CHECK: scf.forall (%{{.*}}) in (2)
// CHECK:   scf.for
// CHECK:     scf.for
// CHECK:       tensor.extract %{{.*}} : tensor<2x8xi32>
// CHECK:       arith.cmpi slt, %{{.*}}, %[[LIMIT]]
// CHECK:       scf.if
// CHECK:         linalg.copy
func.func @dispatch_bpr_runtime_capacity(%x: tensor<2x8x16xf32>, %ids: tensor<2x8x2xi32>,
    %o: tensor<2x8xi32>, %cap: index) -> (tensor<4x2x3x16xf32>, tensor<2x8x2xi32>) {
  %b, %s = vmoe.dispatch %x, %ids, %o capacity(%cap) {capacity = 3 : i64}
      : tensor<2x8x16xf32>, tensor<2x8x2xi32>, tensor<2x8xi32> -> tensor<4x2x3x16xf32>, tensor<2x8x2xi32>
  return %b, %s : tensor<4x2x3x16xf32>, tensor<2x8x2xi32>
}

// -----

// Masked tokens: a choice is placed only if its token's position g * S + t
// is below the valid count (and its expert has room).
// CHECK-LABEL: func.func @dispatch_masked_padding
// CHECK-SAME: %[[N:[a-z0-9]+]]: index
// CHECK: scf.forall (%[[G:.*]]) in (2)
// CHECK:   scf.for
// CHECK:     scf.for
// CHECK:       %[[GS:.*]] = arith.muli %[[G]], %{{.*}} : index
// CHECK:       %[[POS:.*]] = arith.addi %[[GS]], %{{.*}} : index
// CHECK:       arith.cmpi slt, %[[POS]], %[[N]] : index
// CHECK:       scf.if
func.func @dispatch_masked_padding(%x: tensor<2x8x16xf32>, %ids: tensor<2x8x2xi32>, %n: index)
    -> tensor<2x8x2xi32> {
  %b, %s = vmoe.dispatch %x, %ids valid(%n) {capacity = 3 : i64}
      : tensor<2x8x16xf32>, tensor<2x8x2xi32> -> tensor<4x2x3x16xf32>, tensor<2x8x2xi32>
  return %s : tensor<2x8x2xi32>
}

// -----

// fused_route routes one group slice at a time: its assign_slots gets the
// valid count shifted by the tokens of the earlier groups, g * S.
// CHECK-LABEL: func.func @fused_route_masked_padding
// CHECK-SAME: %[[N:[a-z0-9]+]]: index
// CHECK: scf.forall (%[[G:.*]]) in (2)
// CHECK:   %[[GS:.*]] = arith.muli %[[G]], %{{.*}} : index
// CHECK:   %[[REST:.*]] = arith.subi %[[N]], %[[GS]] : index
// CHECK:   arith.cmpi slt, %{{.*}}, %[[REST]] : index
func.func @fused_route_masked_padding(%x: tensor<2x8x16xf32>, %r: tensor<16x4xf32>, %n: index)
    -> tensor<4x2xi32> {
  %ids, %w, %s, %e, %f = vmoe.fused_route %x, %r valid(%n) {k = 1 : i64}
      : tensor<2x8x16xf32>, tensor<16x4xf32>
      -> tensor<2x8x1xi32>, tensor<2x8x1xf32>, tensor<2x8x1xi32>, tensor<4x2x3xi32>, tensor<4x2xi32>
  return %f : tensor<4x2xi32>
}

// -----

// An unsized dispatch evaluates the capacity rule on the runtime S.
// CHECK-LABEL: func.func @dispatch_unsized_dynamic_tokens
// CHECK: tensor.dim
// CHECK: math.roundeven
// CHECK: scf.forall
func.func @dispatch_unsized_dynamic_tokens(%x: tensor<1x?x16xf32>, %ids: tensor<1x?x1xi32>)
    -> tensor<4x1x?x16xf32> {
  %b, %s = vmoe.dispatch %x, %ids {capacity_ratio = 1.0 : f64}
      : tensor<1x?x16xf32>, tensor<1x?x1xi32> -> tensor<4x1x?x16xf32>, tensor<1x?x1xi32>
  return %b : tensor<4x1x?x16xf32>
}

// -----

// The expert MLP: matmul, bias + activation, matmul, bias.
// CHECK-LABEL: func.func @expert_ffn_gelu_tanh
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]
// CHECK: linalg.generic
// CHECK:   math.tanh
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]
// CHECK: linalg.generic
// CHECK-NOT: math.tanh
// CHECK: return
func.func @expert_ffn_gelu_tanh(%b: tensor<4x1x3x8xf32>, %w1: tensor<4x8x16xf32>,
    %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) -> tensor<4x1x3x8xf32> {
  %y = vmoe.expert_ffn %b, %w1, %b1, %w2, %b2
      : tensor<4x1x3x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  return %y : tensor<4x1x3x8xf32>
}

// -----

// CHECK-LABEL: func.func @expert_ffn_activations
// CHECK: math.erf
// CHECK: arith.maximumf
// CHECK: math.exp
func.func @expert_ffn_activations(%b: tensor<4x1x3x8xf32>, %w1: tensor<4x8x16xf32>,
    %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) -> tensor<4x1x3x8xf32> {
  %y0 = vmoe.expert_ffn %b, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<gelu_erf>}
      : tensor<4x1x3x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %y1 = vmoe.expert_ffn %y0, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<relu>}
      : tensor<4x1x3x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %y2 = vmoe.expert_ffn %y1, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<silu>}
      : tensor<4x1x3x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  return %y2 : tensor<4x1x3x8xf32>
}

// -----

// Combine: one forall iteration per token adds its kept choices in order.
// CHECK-LABEL: func.func @combine
// CHECK: scf.forall (%{{.*}}, %{{.*}}) in (2, 8)
// CHECK:   linalg.fill
// CHECK:   scf.for
// CHECK:     scf.if
// CHECK:       arith.mulf
// CHECK:       arith.addf
func.func @combine(%y: tensor<4x2x3x16xf32>, %ids: tensor<2x8x2xi32>, %s: tensor<2x8x2xi32>,
                   %w: tensor<2x8x2xf32>) -> tensor<2x8x16xf32> {
  %o = vmoe.combine %y, %ids, %s, %w
      : tensor<4x2x3x16xf32>, tensor<2x8x2xi32>, tensor<2x8x2xi32>, tensor<2x8x2xf32> -> tensor<2x8x16xf32>
  return %o : tensor<2x8x16xf32>
}

// -----

/// Upstream ops are left alone.
// CHECK-LABEL: func.func @negative_no_vmoe
// CHECK-NEXT: arith.addf
// CHECK-NEXT: return
func.func @negative_no_vmoe(%a: f32) -> f32 {
  %0 = arith.addf %a, %a : f32
  return %0 : f32
}

// -----

// assign_slots: the dispatch loops, recording t * k + i per slot and the
// fill per expert; no rows are copied.
// CHECK-LABEL: func.func @assign_slots
// CHECK: linalg.fill ins(%c-1_i32 : i32) {{.*}} -> tensor<4x2x3xi32>
// CHECK: scf.forall (%{{.*}}) in (2)
// CHECK:   scf.for
// CHECK:     scf.for
// CHECK:       scf.if
// CHECK:         arith.muli
// CHECK:         arith.addi
// CHECK-NOT:     linalg.copy
// CHECK:   tensor.parallel_insert_slice {{.*}} [4, 1] [1, 1] : tensor<4x1xi32> into tensor<4x2xi32>
func.func @assign_slots(%ids: tensor<2x8x2xi32>, %o: tensor<2x8xi32>) -> (tensor<2x8x2xi32>, tensor<4x2x3xi32>, tensor<4x2xi32>) {
  %s, %e, %f = vmoe.assign_slots %ids, %o : tensor<2x8x2xi32>, tensor<2x8xi32> -> tensor<2x8x2xi32>, tensor<4x2x3xi32>, tensor<4x2xi32>
  return %s, %e, %f : tensor<2x8x2xi32>, tensor<4x2x3xi32>, tensor<4x2xi32>
}

// -----

// fused_experts: per expert, a table of its filled rows over all groups,
// then two microkernel GEMMs on those rows (gathered from x) writing
// per-choice planes; then the kept choices of each token added in order.
// Operands are read in place at any offset (weights sliced from a model's
// flat buffer are not copied).
// CHECK-LABEL: func.func @fused_experts
// CHECK: bufferization.to_buffer %{{.*}} read_only : tensor<4x16x32xf32> to memref<4x16x32xf32, strided<[512, 32, 1], offset: ?>>
// CHECK: %[[PLANES:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x1x8x16xf32>
// CHECK: scf.forall (%{{.*}}) in (4)
// CHECK:   memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK:   scf.for
// CHECK:     scf.for
// CHECK:   scf.if
// CHECK:     memref.alloc(%{{.*}}) {{.*}} : memref<?x32xf32>
// CHECK:     vector.fma
// CHECK:     vector.fma
// CHECK: bufferization.to_tensor %[[PLANES]] restrict writable
// CHECK: linalg.generic
// CHECK:   arith.select
// CHECK:   arith.addf
// CHECK:   arith.select
// CHECK:   arith.addf
func.func @fused_experts(%x: tensor<1x8x16xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x3xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x32x16xf32>, %b2: tensor<4x16xf32>) -> tensor<1x8x16xf32> {
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x3xi32>, tensor<4x1xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return %o : tensor<1x8x16xf32>
}

// -----

// fused_route: one forall iteration per group routes a 1 x S slice (its own
// contraction, softmax, top-k, BPR ranks and assignment).
// CHECK-LABEL: func.func @fused_route
// CHECK: scf.forall (%[[G:.*]]) in (3)
// CHECK:   tensor.extract_slice %{{.*}}[%[[G]], 0, 0] [1, 8, 16] [1, 1, 1] : tensor<3x8x16xf32> to tensor<1x8x16xf32>
// CHECK:   linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "parallel"]
// CHECK:   math.exp
// CHECK:   arith.maximumf
// CHECK:   scf.forall
// CHECK:   tensor.parallel_insert_slice %{{.*}} into %{{.*}}[0, %[[G]], 0] [4, 1, 3] [1, 1, 1] : tensor<4x1x3xi32> into tensor<4x3x3xi32>
// CHECK-NOT: vmoe.
func.func @fused_route(%x: tensor<3x8x16xf32>, %r: tensor<16x4xf32>)
    -> (tensor<3x8x2xi32>, tensor<3x8x2xf32>, tensor<3x8x2xi32>, tensor<4x3x3xi32>, tensor<4x3xi32>) {
  %ids, %w, %s, %e, %f = vmoe.fused_route %x, %r {k = 2 : i64, priority = #vmoe.priority_score<max>}
      : tensor<3x8x16xf32>, tensor<16x4xf32>
      -> tensor<3x8x2xi32>, tensor<3x8x2xf32>, tensor<3x8x2xi32>, tensor<4x3x3xi32>, tensor<4x3xi32>
  return %ids, %w, %s, %e, %f : tensor<3x8x2xi32>, tensor<3x8x2xf32>, tensor<3x8x2xi32>, tensor<4x3x3xi32>, tensor<4x3xi32>
}
