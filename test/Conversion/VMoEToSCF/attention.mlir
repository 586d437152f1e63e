// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf="vector-width=16 tile-rows=8 tile-vectors=3 bf16-dot=true" \
// RUN:   | FileCheck %s --check-prefix=DOT
// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf="vector-width=8 tile-rows=6 tile-vectors=2" \
// RUN:   | FileCheck %s --check-prefix=SHIFT

// vmoe.attention with bf16_products: one scf.forall over images x heads
// (2 x 3), its scratch marked for the stack; k's rows rounded to pairs,
// the pair panels of qᵀ by 16 x 16 register transposes (8 x 8 without
// AVX-512; no scatter), the pair GEMM q.kᵀ (vdpbf16ps, or shift + fma),
// the softmax down the keys (the maximum by compare and select, math.exp),
// the probabilities rounded to pairs, v's pair panels, the pair GEMM p.v;
// no linalg op is left.

// DOT-LABEL: func.func @bf16_products
// DOT: bufferization.to_buffer %{{.*}} read_only : tensor<2x50x3x40xf32> to memref<2x50x3x40xf32, strided<[?, ?, ?, 1], offset: ?>>
// DOT: scf.forall (%{{.*}}) in (%c6)
// DOT: memref.alloca() {alignment = 64 : i64, vmoe.stack_scratch} : memref<50x20xi32>
// DOT: vector.shuffle %{{.*}}, %{{.*}} [1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31] : vector<16xi32>, vector<16xi32>
// DOT-NOT: vector.scatter
// DOT: x86vector.avx512.dot
// DOT-NOT: arith.maximumf
// DOT: %[[GT:.*]] = arith.cmpf ogt, %[[X:.*]], %[[MAX:.*]] : vector<16xf32>
// DOT: arith.select %[[GT]], %[[X]], %[[MAX]] : vector<16xi1>, vector<16xf32>
// DOT: math.exp {{.*}} : vector<16xf32>
// DOT: x86vector.avx512.dot
// DOT: bufferization.to_tensor
// DOT-NOT: linalg.generic
// DOT-LABEL: return

// SHIFT-LABEL: func.func @bf16_products
// SHIFT: scf.forall (%{{.*}}) in (%c6)
// SHIFT: vector.shuffle %{{.*}}, %{{.*}} [1, 9, 3, 11, 5, 13, 7, 15] : vector<8xi32>, vector<8xi32>
// SHIFT-NOT: vector.scatter
// SHIFT-NOT: x86vector.avx512.dot
// SHIFT: math.exp {{.*}} : vector<8xf32>
// SHIFT-NOT: linalg.generic
// SHIFT-LABEL: return
func.func @bf16_products(%q: tensor<2x50x3x40xf32>, %k: tensor<2x50x3x40xf32>, %v: tensor<2x50x3x40xf32>) -> tensor<2x50x3x40xf32> {
  %c = vmoe.attention %q, %k, %v {bf16_products}
      : tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>
  return %c : tensor<2x50x3x40xf32>
}

// -----

// The class tokens' queries only (Tq = 1): the same loop.

// DOT-LABEL: func.func @class_queries
// DOT: scf.forall (%{{.*}}) in (%c6)
// DOT-NOT: linalg.generic
// DOT-LABEL: return
func.func @class_queries(%q: tensor<2x1x3x40xf32>, %k: tensor<2x50x3x40xf32>, %v: tensor<2x50x3x40xf32>) -> tensor<2x1x3x40xf32> {
  %c = vmoe.attention %q, %k, %v {bf16_products}
      : tensor<2x1x3x40xf32>, tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>
  return %c : tensor<2x1x3x40xf32>
}

// -----

// Without bf16_products: linalg.generic ops (k copied to kᵀ, q.kᵀ, the
// scale, the softmax's max / exp / sum / division, p.v), no loop of its own.

// DOT-LABEL: func.func @f32_products
// DOT-NOT: scf.forall
// DOT-COUNT-8: linalg.generic
// DOT-NOT: linalg.generic
// DOT-LABEL: return
func.func @f32_products(%q: tensor<2x50x3x40xf32>, %k: tensor<2x50x3x40xf32>, %v: tensor<2x50x3x40xf32>) -> tensor<2x50x3x40xf32> {
  %c = vmoe.attention %q, %k, %v
      : tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>
  return %c : tensor<2x50x3x40xf32>
}

// -----

// An item whose scratch would pass 512 KB (2048 tokens: the scores alone
// are 16 MB) is left to the unfused bf16 contractions: no kᵀ copy, the
// rounded products' truncf / extf bodies.

// DOT-LABEL: func.func @long_sequence
// DOT-NOT: scf.forall
// DOT: linalg.generic
// DOT: arith.truncf
// DOT-LABEL: return
func.func @long_sequence(%q: tensor<1x2048x1x64xf32>, %k: tensor<1x2048x1x64xf32>, %v: tensor<1x2048x1x64xf32>) -> tensor<1x2048x1x64xf32> {
  %c = vmoe.attention %q, %k, %v {bf16_products}
      : tensor<1x2048x1x64xf32>, tensor<1x2048x1x64xf32>, tensor<1x2048x1x64xf32>
  return %c : tensor<1x2048x1x64xf32>
}
