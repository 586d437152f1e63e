// RUN: vmoe-opt %s -split-input-file \
// RUN:   -vmoe-vectorize-contractions="vector-width=16 tile-rows=8 tile-vectors=3 bf16-dot=true parallel=true" \
// RUN:   | FileCheck %s --check-prefix=DOT
// RUN: vmoe-opt %s -split-input-file \
// RUN:   -vmoe-vectorize-contractions="vector-width=16 tile-rows=8 tile-vectors=3" \
// RUN:   | FileCheck %s --check-prefix=SHIFT

// A contraction of two operands both rounded to bf16 (attention's q kᵀ
// with --precision=bf16, buildBF16RoundedContractionBody): per call (image
// and head, across threads) B is packed into pair panels on the stack, two
// rows of kᵀ at a time (read contiguously along the 50 keys, interleaved,
// rounded): ceil(50 / 64) x 4 panels of 16 lanes (the 6 x 4 tile), 32
// words of k pairs; A's rows are rounded to pairs per block of rows; then
// the pair microkernel (vdpbf16ps with bf16-dot, else shift + fma).
// DOT-LABEL: func.func @scores_bf16
// DOT-NOT: linalg.generic
// DOT: scf.parallel
// DOT: llvm.intr.stacksave
// DOT: memref.alloca() {alignment = 64 : i64} : memref<4x32x16xi32>
// DOT: vector.maskedload %{{.*}} : memref<2x8x64x50xf32>, vector<16xi1>, vector<16xf32> into vector<16xf32>
// DOT: vector.shuffle %{{.*}}, %{{.*}} [0, 16, 1, 17
// DOT: arith.truncf %{{.*}} : vector<32xf32> to vector<32xbf16>
// DOT: vector.store %{{.*}} : memref<4x32x16xi32>, vector<16xi32>
// DOT: memref.alloca() {alignment = 64 : i64} : memref<{{[0-9]+}}x32xi32>
// DOT: scf.for {{.*}} step %c6
// DOT: vector.load %{{.*}} : memref<4x32x16xi32>, vector<16xi32>
// DOT: x86vector.avx512.dot
// DOT-NOT: vector.fma
// DOT: llvm.intr.stackrestore
// DOT-NOT: linalg.generic
// DOT: return
// SHIFT-LABEL: func.func @scores_bf16
// SHIFT-NOT: linalg.generic
// SHIFT-NOT: x86vector
// SHIFT: memref.alloca() {alignment = 64 : i64} : memref<4x32x16xi32>
// SHIFT: arith.shli
// SHIFT: vector.fma
// SHIFT-NOT: linalg.generic
// SHIFT: return
func.func @scores_bf16(%q: memref<2x50x8x64xf32>, %kt: memref<2x8x64x50xf32>,
                       %s: memref<2x8x50x50xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, h, i, j, c) -> (n, i, h, c)>,
                                   affine_map<(n, h, i, j, c) -> (n, h, c, j)>,
                                   affine_map<(n, h, i, j, c) -> (n, h, i, j)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %kt : memref<2x50x8x64xf32>, memref<2x8x64x50xf32>) outs(%s : memref<2x8x50x50xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %xt = arith.truncf %x : f32 to bf16
    %xr = arith.extf %xt : bf16 to f32
    %yt = arith.truncf %y : f32 to bf16
    %yr = arith.extf %yt : bf16 to f32
    %p = arith.mulf %xr, %yr : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// The same product reading k itself (B contiguous along k, c = 40: 20
// words; 50 keys in 4 panels of 16): per panel, each key's first 32
// values of c round to 16 words, and the 16 keys' words, a 16 x 16 tile,
// are transposed by 4 rounds of shuffles into 16 word rows of the panel;
// the next 32 values are masked past 40 and give the last 4 word rows. The
// 3 full panels loop; the last, unrolled, loads its 2 keys (48, 49) only.
// No scatter.
// DOT-LABEL: func.func @scores_bf16_from_k
// DOT-NOT: linalg.generic
// DOT: memref.alloca() {alignment = 64 : i64} : memref<4x20x16xi32>
// DOT: scf.for %{{.*}} = %{{.*}} to %c3 step
// DOT: vector.load %{{.*}} : memref<2x50x8x40xf32>, vector<32xf32>
// DOT: arith.truncf %{{.*}} : vector<32xf32> to vector<32xbf16>
// DOT: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi32>, vector<16xi32>
// DOT: vector.shuffle %{{.*}}, %{{.*}} [1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31] : vector<16xi32>, vector<16xi32>
// DOT-COUNT-16: vector.store %{{.*}} : memref<4x20x16xi32>, vector<16xi32>
// DOT: vector.create_mask %c8{{.*}} : vector<32xi1>
// DOT-COUNT-16: vector.maskedload %{{.*}} : memref<2x50x8x40xf32>, vector<32xi1>, vector<32xf32> into vector<32xf32>
// DOT-COUNT-4: vector.store %{{.*}} : memref<4x20x16xi32>, vector<16xi32>
// DOT: arith.muli %c3{{[_0-9]*}}, %c16
// DOT-COUNT-2: vector.load %{{.*}} : memref<2x50x8x40xf32>, vector<32xf32>
// DOT-NOT: memref<2x50x8x40xf32>
// DOT-COUNT-16: vector.store %{{.*}} : memref<4x20x16xi32>, vector<16xi32>
// DOT-COUNT-2: vector.maskedload %{{.*}} : memref<2x50x8x40xf32>
// DOT-NOT: memref<2x50x8x40xf32>
// DOT-COUNT-4: vector.store %{{.*}} : memref<4x20x16xi32>, vector<16xi32>
// DOT-NOT: vector.scatter
// DOT: x86vector.avx512.dot
// DOT-NOT: vector.transpose
// DOT-NOT: linalg.generic
// DOT: return
// SHIFT-LABEL: func.func @scores_bf16_from_k
// SHIFT-NOT: linalg.generic
// SHIFT: memref.alloca() {alignment = 64 : i64} : memref<4x20x16xi32>
// SHIFT: vector.shuffle
// SHIFT: vector.fma
// SHIFT-NOT: linalg.generic
// SHIFT: return
func.func @scores_bf16_from_k(%q: memref<2x50x8x40xf32>, %k: memref<2x50x8x40xf32>,
                              %s: memref<2x8x50x50xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, h, i, j, c) -> (n, i, h, c)>,
                                   affine_map<(n, h, i, j, c) -> (n, j, h, c)>,
                                   affine_map<(n, h, i, j, c) -> (n, h, i, j)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<2x50x8x40xf32>, memref<2x50x8x40xf32>) outs(%s : memref<2x8x50x50xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %xt = arith.truncf %x : f32 to bf16
    %xr = arith.extf %xt : bf16 to f32
    %yt = arith.truncf %y : f32 to bf16
    %yr = arith.extf %yt : bf16 to f32
    %p = arith.mulf %xr, %yr : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// An odd K (the context product p v over 25 keys): the last pair's high
// half is 0 (the odd row past K is not read: its index is clamped to the
// even row and the loaded row replaced by zeros).
// DOT-LABEL: func.func @context_odd_k
// DOT: memref.alloca() {alignment = 64 : i64} : memref<4x13x16xi32>
// DOT: %[[ODD:.*]] = arith.addi %{{.*}}, %c1
// DOT: %[[HAS:.*]] = arith.cmpi ult, %[[ODD]], %c25
// DOT: arith.select %[[HAS]], %[[ODD]], %{{.*}} : index
// DOT: arith.select %[[HAS]], %{{.*}}, %{{.*}} : vector<16xf32>
// DOT: x86vector.avx512.dot
func.func @context_odd_k(%p: memref<3x25x25xf32>, %v: memref<3x25x64xf32>,
                         %c: memref<3x25x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(h, i, j, c) -> (h, i, j)>,
                                   affine_map<(h, i, j, c) -> (h, j, c)>,
                                   affine_map<(h, i, j, c) -> (h, i, c)>],
                  iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
      ins(%p, %v : memref<3x25x25xf32>, memref<3x25x64xf32>) outs(%c : memref<3x25x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %xt = arith.truncf %x : f32 to bf16
    %xr = arith.extf %xt : bf16 to f32
    %yt = arith.truncf %y : f32 to bf16
    %yr = arith.extf %yt : bf16 to f32
    %m = arith.mulf %xr, %yr : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Left alone: a B too large to pack per call (more than 256 KB of pair
// panels) and an operand rounded alone (not the rounded product; linalg's
// contraction check admits the casts, and the f32 microkernel would drop
// the rounding). Without bf16-dot their rounding is expanded to integer
// arithmetic.
// DOT-LABEL: func.func @too_large
// DOT: linalg.generic
// DOT: arith.truncf
// SHIFT-LABEL: func.func @too_large
// SHIFT: linalg.generic
// SHIFT-NOT: arith.truncf
// SHIFT: return
func.func @too_large(%a: memref<8x2048xf32>, %b: memref<2048x1024xf32>, %c: memref<8x1024xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>,
                                   affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<8x2048xf32>, memref<2048x1024xf32>) outs(%c : memref<8x1024xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %xt = arith.truncf %x : f32 to bf16
    %xr = arith.extf %xt : bf16 to f32
    %yt = arith.truncf %y : f32 to bf16
    %yr = arith.extf %yt : bf16 to f32
    %m = arith.mulf %xr, %yr : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  return
}
// DOT-LABEL: func.func @one_operand_rounded
// DOT: linalg.generic
func.func @one_operand_rounded(%a: memref<8x32xf32>, %b: memref<32x64xf32>, %c: memref<8x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>,
                                   affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<8x32xf32>, memref<32x64xf32>) outs(%c : memref<8x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %xt = arith.truncf %x : f32 to bf16
    %xr = arith.extf %xt : bf16 to f32
    %m = arith.mulf %xr, %y : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  return
}
