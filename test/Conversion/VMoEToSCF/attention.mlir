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

// -----

// q, k and v already rounded to bf16 (the qkv projection's epilogue): the
// same fused loop reads their pairs as they are. k's rows are copied word
// for word (two bf16 loaded as one i32 lane), the qᵀ panels transpose the
// words of q's rows, v's panels interleave two bf16 rows; nothing is
// rounded but the probabilities (f32 softmax). The result is f32.
// DOT-LABEL: func.func @bf16_operands
// DOT: scf.forall
// DOT: vector.maskedload %{{.*}} : memref<2x50x3x40xbf16, strided<{{.*}}>>, vector<32xi1>, vector<32xbf16> into vector<32xbf16>
// DOT-NEXT: vector.bitcast %{{.*}} : vector<32xbf16> to vector<16xi32>
// DOT: vector.shuffle
// DOT: vector.maskedload %{{.*}} : memref<2x50x3x40xbf16, strided<{{.*}}>>, vector<16xi1>, vector<16xbf16> into vector<16xbf16>
// DOT: vector.shuffle %{{.*}}, %{{.*}} [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31] : vector<16xbf16>, vector<16xbf16>
// DOT-NEXT: vector.bitcast %{{.*}} : vector<32xbf16> to vector<16xi32>
// DOT: x86vector.avx512.dot
// DOT-NOT: linalg.
// DOT: return %{{.*}} : tensor<2x50x3x40xf32>
func.func @bf16_operands(%q: tensor<2x50x3x40xbf16>, %k: tensor<2x50x3x40xbf16>, %v: tensor<2x50x3x40xbf16>) -> tensor<2x50x3x40xf32> {
  %c = vmoe.attention %q, %k, %v {bf16_products}
      : tensor<2x50x3x40xbf16>, tensor<2x50x3x40xbf16>, tensor<2x50x3x40xbf16>
  return %c : tensor<2x50x3x40xf32>
}

// -----

// bf16 operands of an item too large for the fused loop are widened to f32
// first (exact), then take the unfused bf16 contractions, which round them
// back to the same values.
// DOT-LABEL: func.func @long_sequence_bf16
// DOT-NOT: scf.forall
// DOT: linalg.generic
// DOT: arith.extf %{{.*}} : bf16 to f32
// DOT: arith.truncf
// DOT-LABEL: return
func.func @long_sequence_bf16(%q: tensor<1x2048x1x64xbf16>, %k: tensor<1x2048x1x64xbf16>, %v: tensor<1x2048x1x64xbf16>) -> tensor<1x2048x1x64xf32> {
  %c = vmoe.attention %q, %k, %v {bf16_products}
      : tensor<1x2048x1x64xbf16>, tensor<1x2048x1x64xbf16>, tensor<1x2048x1x64xbf16>
  return %c : tensor<1x2048x1x64xf32>
}
