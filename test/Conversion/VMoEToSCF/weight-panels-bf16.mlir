// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf="vector-width=16 tile-rows=8 tile-vectors=3 bf16-dot=true" \
// RUN:   | FileCheck %s --check-prefix=DOT
// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf="vector-width=16 tile-rows=8 tile-vectors=3" \
// RUN:   | FileCheck %s --check-prefix=SHIFT
// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf="bf16-dot=true" \
// RUN:   | FileCheck %s --check-prefix=DOT8
// RUN: vmoe-opt %s -split-input-file --vmoe-lower-to-cpu="vector-width=16 bf16-dot=true" \
// RUN:   | FileCheck %s --check-prefix=LLVM-DOT
// RUN: vmoe-opt %s -split-input-file --vmoe-lower-to-cpu="vector-width=8" \
// RUN:   | FileCheck %s --check-prefix=LLVM-SHIFT

// Expert weights in bf16 pair panels (weight_storage = bf16_pairs): the
// gathered rows are rounded to bf16 pairs (one i32 per two k), the hidden
// rows are written as pairs by GEMM 1's epilogue, and the GEMMs step over
// pairs of k reading the panels in place as vectors of i32 words. With bf16-dot (the target has AVX512_BF16) the
// products are x86vector.avx512.dot (vdpbf16ps); without it, the even k of
// each word is its low half shifted left by 16, the odd k its high half,
// each an f32 fma: code for any x86 host (AVX2 included).

// DOT-LABEL: func.func @fused_experts_bf16_pairs
// DOT-NOT: memref<?x?x?x48xf32>
// DOT: vector.maskedload {{.*}} : memref<1x16x32xf32, {{.*}}>, vector<32xi1>, vector<32xf32> into vector<32xf32>
// DOT: arith.truncf %{{.*}} : vector<32xf32> to vector<32xbf16>
// DOT: vector.bitcast %{{.*}} : vector<32xbf16> to vector<16xi32>
// DOT: vector.maskedstore {{.*}} : memref<?x?xi32>, vector<16xi1>, vector<16xi32>
// DOT: vector.load %{{.*}} : memref<4x4x16x16xf32, {{.*}}>, vector<16xf32>
// DOT: vector.bitcast %{{.*}} : vector<16xf32> to vector<16xi32>
// DOT: vector.bitcast %{{.*}} : vector<16xi32> to vector<32xbf16>
// DOT: x86vector.avx512.dot %{{.*}}, %{{.*}}, %{{.*}} : vector<32xbf16> -> vector<16xf32>
// DOT-NOT: vector.fma
// The hidden rows are rounded to bf16 for GEMM 2, so GEMM 1's GELU is the
// logistic form (buildActivation with roundedToBF16), 2^n from the bits.
// DOT-NOT: math.tanh
// DOT: %[[BITS:.*]] = arith.bitcast %{{.*}} : vector<16xf32> to vector<16xi32>
// DOT: %[[BIASED:.*]] = arith.addi %[[BITS]], %{{.*}} : vector<16xi32>
// DOT: arith.shli %[[BIASED]], %{{.*}} : vector<16xi32>
// DOT: arith.divf %{{.*}}, %{{.*}} : vector<16xf32>
// DOT-NOT: math.tanh
// The epilogue rounds its activated vector to the hidden rows' pairs in
// registers (16 values, 8 words); no second pass over f32 hidden rows.
// DOT: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// DOT: vector.bitcast %{{.*}} : vector<16xbf16> to vector<8xi32>
// DOT: vector.store %{{.*}} : memref<?x?xi32>, vector<8xi32>
// DOT-NOT: vector<32xf32> to vector<32xbf16>
// DOT: vector.load %{{.*}} : memref<4x2x32x16xf32, {{.*}}>, vector<16xf32>
// DOT: x86vector.avx512.dot
// DOT-NOT: memref<?x?x?x48xf32>

// SHIFT-LABEL: func.func @fused_experts_bf16_pairs
// SHIFT-NOT: x86vector
// SHIFT: vector.load %{{.*}} : memref<4x4x16x16xf32, {{.*}}>, vector<16xf32>
// SHIFT: %[[WORDS:.*]] = vector.bitcast %{{.*}} : vector<16xf32> to vector<16xi32>
// SHIFT: %[[EVEN:.*]] = arith.shli %[[WORDS]], %{{.*}} : vector<16xi32>
// SHIFT: %[[ODD:.*]] = arith.andi %[[WORDS]], %{{.*}} : vector<16xi32>
// SHIFT: arith.bitcast %[[EVEN]] : vector<16xi32> to vector<16xf32>
// SHIFT: arith.bitcast %[[ODD]] : vector<16xi32> to vector<16xf32>
// SHIFT: vector.fma
// SHIFT-NOT: x86vector

// 8 lanes: the 256-bit form (vector<16xbf16> -> vector<8xf32>).
// DOT8-LABEL: func.func @fused_experts_bf16_pairs
// DOT8: x86vector.avx512.dot %{{.*}}, %{{.*}}, %{{.*}} : vector<16xbf16> -> vector<8xf32>

// LLVM-DOT-LABEL: llvm.func @fused_experts_bf16_pairs
// LLVM-DOT: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// LLVM-SHIFT-LABEL: llvm.func @fused_experts_bf16_pairs
// LLVM-SHIFT-NOT: avx512bf16
// LLVM-SHIFT: llvm.intr.fma
// LLVM-SHIFT-NOT: avx512bf16
func.func @fused_experts_bf16_pairs(%x: tensor<1x16x32xf32>, %s: tensor<1x16x2xi32>, %w: tensor<1x16x2xf32>,
    %e: tensor<4x1x8xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x4x16x16xf32>, %b1: tensor<4x64xf32>,
    %w2: tensor<4x2x32x16xf32>, %b2: tensor<4x32xf32>) -> tensor<1x16x32xf32> {
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      {weight_panels = 16 : i64, weight_storage = #vmoe.panel_storage<bf16_pairs>}
      : tensor<1x16x32xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>, tensor<4x1x8xi32>, tensor<4x1xi32>,
        tensor<4x4x16x16xf32>, tensor<4x64xf32>, tensor<4x2x32x16xf32>, tensor<4x32xf32>
  return %o : tensor<1x16x32xf32>
}

// -----

// Elsewhere a bf16 pair unpack_panels is a widening copy: word
// [n floordiv 16, k floordiv 2, n mod 16], its high half for odd k, else
// its low half shifted left by 16.
// SHIFT: #[[$IN:.*]] = affine_map<(d0, d1) -> (d1 floordiv 16, d0 floordiv 2, d1 mod 16)>
// SHIFT-LABEL: func.func @unpack_panels_bf16_copy
// SHIFT: linalg.generic {indexing_maps = [#[[$IN]], #{{.*}}]
// SHIFT: linalg.index 0 : index
// SHIFT: arith.select
// SHIFT-NOT: vmoe.unpack_panels
func.func @unpack_panels_bf16_copy(%p: tensor<1x3x16xf32>) -> tensor<5x10xf32> {
  %w = vmoe.unpack_panels %p {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<1x3x16xf32> -> tensor<5x10xf32>
  return %w : tensor<5x10xf32>
}
