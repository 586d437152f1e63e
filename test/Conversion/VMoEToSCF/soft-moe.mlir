// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf | FileCheck %s

// soft_moe with G = 2, S = 5, D = 12, E = 8, P = 2 (J = 16): the logits
// G x S x J are the only buffer of S x J per group, written by the logits
// GEMM; the dispatch and combine weights (exp of the logits) are computed
// while packing the GEMM operands (vector exps), after the statistics of a
// column or row (scalar exps). Three foralls: groups, experts, groups.
// CHECK-LABEL: func.func @soft_moe
// CHECK-NOT: tensor<2x5x16xf32>
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2]] : tensor<12x8x2xf32> into tensor<12x16xf32>
// CHECK: %[[LOGITS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x5x16xf32>
// CHECK-NOT: memref<2x5x16xf32>
// CHECK: scf.forall
// CHECK:   vector.store %{{.*}}, %[[LOGITS]]
// CHECK:   math.exp %{{.*}} : f32
// CHECK:   vector.load %[[LOGITS]]
// CHECK:   math.exp %{{.*}} : vector<8xf32>
// CHECK: scf.forall
// CHECK:   vector.fma
// CHECK: scf.forall
// CHECK:   math.exp %{{.*}} : f32
// CHECK:   memref.load %[[LOGITS]]
// CHECK:   vector.from_elements
// CHECK:   math.exp %{{.*}} : vector<8xf32>
// CHECK: bufferization.to_tensor %{{.*}} restrict writable : memref<2x5x12xf32> to tensor<2x5x12xf32>
func.func @soft_moe(%x: tensor<2x5x12xf32>, %phi: tensor<12x8x2xf32>, %scale: tensor<f32>,
    %w1: tensor<8x12x16xf32>, %b1: tensor<8x16xf32>, %w2: tensor<8x16x12xf32>,
    %b2: tensor<8x12xf32>) -> tensor<2x5x12xf32> {
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<2x5x12xf32>, tensor<12x8x2xf32>, tensor<f32>, tensor<8x12x16xf32>, tensor<8x16xf32>,
        tensor<8x16x12xf32>, tensor<8x12xf32>
  return %o : tensor<2x5x12xf32>
}


// -----

// soft_moe with valid(%n): group g's dispatch softmax and dispatch GEMM run
// over its sv = clamp(n - g * S, 0, S) valid tokens, from zeroed slot
// inputs (a group without valid tokens dispatches nothing).
// CHECK-LABEL: func.func @soft_moe_valid
// CHECK-SAME: %[[N:[^:]*]]: index
// CHECK: scf.forall (%[[G:[^)]*]])
// CHECK:   %[[GS:.*]] = arith.muli %[[G]], %{{.*}} : index
// CHECK:   %[[REST:.*]] = arith.subi %[[N]], %[[GS]] : index
// CHECK:   %[[POS:.*]] = arith.maxsi %[[REST]], %{{.*}} : index
// CHECK:   %[[SV:.*]] = arith.minsi %[[POS]], %{{.*}} : index
// CHECK:   scf.for %{{.*}} = %{{.*}} to %[[SV]]
func.func @soft_moe_valid(%x: tensor<2x5x12xf32>, %phi: tensor<12x8x2xf32>, %scale: tensor<f32>,
    %w1: tensor<8x12x16xf32>, %b1: tensor<8x16xf32>, %w2: tensor<8x16x12xf32>,
    %b2: tensor<8x12xf32>, %n: index) -> tensor<2x5x12xf32> {
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2 valid(%n)
      : tensor<2x5x12xf32>, tensor<12x8x2xf32>, tensor<f32>, tensor<8x12x16xf32>, tensor<8x16xf32>,
        tensor<8x16x12xf32>, tensor<8x12xf32>
  return %o : tensor<2x5x12xf32>
}
