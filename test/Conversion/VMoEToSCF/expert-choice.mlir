// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf | FileCheck %s

// expert_choice: the gates of vmoe.route, each expert's column made
// contiguous, then one top-k selection per (group, expert) writing its row
// of token ids and its column of slots.
// CHECK-LABEL: func.func @expert_choice
// CHECK: %[[KEY:.*]] = linalg.transpose ins(%{{.*}} : tensor<2x8x4xf32>) outs(%{{.*}} : tensor<2x4x8xf32>) permutation = [0, 2, 1]
// CHECK: arith.maxsi %{{.*}}, %{{.*}} : index
// CHECK: %[[B:.*]] = arith.minsi
// CHECK: scf.forall (%[[G:.*]], %[[E:.*]]) in (2, 4) shared_outs
// CHECK:   scf.for %{{.*}} = %{{.*}} to %[[B]]
// CHECK:     tensor.extract %[[KEY]][%[[G]], %[[E]], %{{.*}}] : tensor<2x4x8xf32>
// CHECK:   tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%[[E]], %[[G]], 0] [1, 1, 3] [1, 1, 1] : tensor<3xi32> into tensor<4x2x3xi32>
// CHECK:   tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%[[G]], 0, %[[E]]] [1, 8, 1] [1, 1, 1] : tensor<8xi32> into tensor<2x8x4xi32>
func.func @expert_choice(%x: tensor<2x8x16xf32>, %r: tensor<16x4xf32>, %b: index)
    -> (tensor<2x8x4xf32>, tensor<4x2x3xi32>, tensor<2x8x4xi32>) {
  %gates, %tokens, %slots = vmoe.expert_choice %x, %r capacity(%b)
      : tensor<2x8x16xf32>, tensor<16x4xf32> -> tensor<2x8x4xf32>, tensor<4x2x3xi32>, tensor<2x8x4xi32>
  return %gates, %tokens, %slots : tensor<2x8x4xf32>, tensor<4x2x3xi32>, tensor<2x8x4xi32>
}

// -----

// expert_choice_experts: per expert, the table of its taken rows, two
// microkernel GEMMs into y[e, g, slot]; then per token the gate-weighted sum
// over the experts that took it.
// CHECK-LABEL: func.func @expert_choice_experts
// CHECK: %[[Y:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x2x3x16xf32>
// CHECK: scf.forall (%[[EX:.*]]) in (4) {
// CHECK:   scf.if
// CHECK:     vector.fma
// CHECK:     math.tanh
// CHECK:     vector.fma
// CHECK:     vector.store %{{.*}}, %[[Y]][%[[EX]],
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x8x16xf32>
// CHECK: scf.forall (%{{.*}}, %{{.*}}) in (%{{.*}}, %{{.*}}) {
// CHECK:   scf.for
// CHECK:     vector.load %[[Y]]
// CHECK:     arith.mulf %{{.*}} : vector<8xf32>
// CHECK:     arith.select
// CHECK:     arith.addf %{{.*}} : vector<8xf32>
// CHECK:   vector.store %{{.*}}, %[[OUT]]
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable
func.func @expert_choice_experts(%x: tensor<2x8x16xf32>, %g: tensor<2x8x4xf32>, %t: tensor<4x2x3xi32>,
    %s: tensor<2x8x4xi32>, %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>, %w2: tensor<4x32x16xf32>,
    %b2: tensor<4x16xf32>) -> tensor<2x8x16xf32> {
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<2x8x16xf32>, tensor<2x8x4xf32>, tensor<4x2x3xi32>, tensor<2x8x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return %o : tensor<2x8x16xf32>
}


// -----

// Dynamic G, B and D: the y buffer takes them from the operands.
// CHECK-LABEL: func.func @expert_choice_experts_dynamic
// CHECK: memref.alloc(%{{.*}}, %{{.*}}, %{{.*}}) {alignment = 64 : i64} : memref<4x?x?x?xf32>
func.func @expert_choice_experts_dynamic(%x: tensor<?x8x?xf32>, %g: tensor<?x8x4xf32>, %t: tensor<4x?x?xi32>,
    %s: tensor<?x8x4xi32>, %w1: tensor<4x?x32xf32>, %b1: tensor<4x32xf32>, %w2: tensor<4x32x?xf32>,
    %b2: tensor<4x?xf32>) -> tensor<?x8x?xf32> {
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<?x8x?xf32>, tensor<?x8x4xf32>, tensor<4x?x?xi32>, tensor<?x8x4xi32>,
        tensor<4x?x32xf32>, tensor<4x32xf32>, tensor<4x32x?xf32>, tensor<4x?xf32>
  return %o : tensor<?x8x?xf32>
}

// -----

// expert_choice with valid(%n): the transposed gates of token g * S + t
// >= n become NaN, which the top-k selection never takes.
// CHECK-LABEL: func.func @expert_choice_valid
// CHECK-SAME: %{{.*}}: tensor<2x8x16xf32>, %{{.*}}: tensor<16x4xf32>, %[[N:.*]]: index
// CHECK: linalg.transpose
// CHECK: %[[NAN:.*]] = arith.constant 0x7FC00000 : f32
// CHECK: linalg.generic
// CHECK:   %[[G:.*]] = linalg.index 0 : index
// CHECK:   %[[T:.*]] = linalg.index 2 : index
// CHECK:   %[[GS:.*]] = arith.muli %[[G]], %{{.*}} : index
// CHECK:   %[[FLAT:.*]] = arith.addi %[[GS]], %[[T]] : index
// CHECK:   %[[KEEP:.*]] = arith.cmpi slt, %[[FLAT]], %[[N]] : index
// CHECK:   arith.select %[[KEEP]], %{{.*}}, %[[NAN]] : f32
// CHECK: scf.forall
func.func @expert_choice_valid(%x: tensor<2x8x16xf32>, %r: tensor<16x4xf32>, %n: index)
    -> tensor<4x2x3xi32> {
  %gates, %tokens, %slots = vmoe.expert_choice %x, %r valid(%n)
      : tensor<2x8x16xf32>, tensor<16x4xf32> -> tensor<2x8x4xf32>, tensor<4x2x3xi32>, tensor<2x8x4xi32>
  return %tokens : tensor<4x2x3xi32>
}
