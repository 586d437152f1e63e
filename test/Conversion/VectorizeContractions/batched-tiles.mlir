// RUN: vmoe-opt %s -split-input-file -vmoe-vectorize-contractions | FileCheck %s
// RUN: vmoe-opt %s -split-input-file -vmoe-vectorize-contractions="parallel=true" \
// RUN:   | FileCheck %s --check-prefix=PAR
// RUN: vmoe-opt %s -split-input-file \
// RUN:   -vmoe-vectorize-contractions="vector-width=16 tile-rows=8 tile-vectors=3" \
// RUN:   | FileCheck %s --check-prefix=WIDE

// Attention scores q . kT batched over images x heads (kT [N, heads, dh, T]
// made by the frontend, so B is contiguous along the output columns): the
// microkernel per (image, head). With `parallel` and enough work the
// batches run on threads, each packing into a scratch on its own stack (a
// memref.alloca per column block between llvm.intr.stacksave and
// stackrestore; nothing from the heap); the column blocks inside stay serial.
// 26 rows = 4 full tiles of 6 and one exact tile of 2 (no padded rows).
// CHECK-LABEL: func.func @attention_scores
// CHECK: scf.for
// CHECK:   scf.for
// CHECK-NOT: memref.alloc(
// CHECK:     llvm.intr.stacksave
// CHECK:       memref.alloca() {alignment = 64 : i64} : memref<16x512x16xf32>
// CHECK:     scf.for {{.*}} step %c6
// CHECK-COUNT-12: vector.fma
// CHECK:     scf.index_switch
// CHECK:     case 2 {
// CHECK-COUNT-4: vector.fma
// CHECK-NOT: memref.dealloc
// CHECK: return
// PAR-LABEL: func.func @attention_scores
// PAR-NOT: memref.alloc(
// PAR: scf.parallel (%{{.*}}, %{{.*}}) = (%{{.*}}, %{{.*}}) to (%c8, %c6)
// PAR:   llvm.intr.stacksave
// PAR:     memref.alloca()
// PAR-NOT: scf.parallel
// PAR-NOT: memref.dealloc
// PAR: return
func.func @attention_scores(%q: memref<8x26x6x64xf32>, %kt: memref<8x6x64x32xf32>,
                            %s: memref<8x6x26x32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, h, i, j, c) -> (n, i, h, c)>,
                                   affine_map<(n, h, i, j, c) -> (n, h, c, j)>,
                                   affine_map<(n, h, i, j, c) -> (n, h, i, j)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %kt : memref<8x26x6x64xf32>, memref<8x6x64x32xf32>) outs(%s : memref<8x6x26x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

/// A single large GEMM (no batch dims) keeps splitting its column blocks.
// PAR-LABEL: func.func @negative_single_gemm_batches
// PAR: scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}})
// PAR-NOT: scf.parallel
func.func @negative_single_gemm_batches(%a: memref<1024x128xf32>, %b: memref<128x64xf32>,
                                        %c: memref<1024x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<1024x128xf32>, memref<128x64xf32>) outs(%c : memref<1024x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// With AVX-512's 8 x 3 tile (48-wide panels), attention's T = 50 key
// columns would be computed as 96; B packed per call may take 6 x 4 (64
// wide: one panel, 64 columns) instead (as panels packed at load do,
// panel-operands.mlir), and N = 96 keeps 8 x 3.
// PAR-LABEL: func.func @attention_scores_t50
// WIDE-LABEL: func.func @attention_scores_t50
// WIDE: memref.alloca() {alignment = 64 : i64} : memref<4x512x64xf32>
// WIDE: scf.for {{.*}} step %c6
// WIDE-COUNT-24: vector.fma
// WIDE-LABEL: func.func @columns_96
// WIDE: memref.alloca() {alignment = 64 : i64} : memref<5x512x48xf32>
// WIDE: scf.for {{.*}} step %c8
func.func @attention_scores_t50(%q: memref<2x50x8x64xf32>, %kt: memref<2x8x64x50xf32>,
                                %s: memref<2x8x50x50xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, h, i, j, c) -> (n, i, h, c)>,
                                   affine_map<(n, h, i, j, c) -> (n, h, c, j)>,
                                   affine_map<(n, h, i, j, c) -> (n, h, i, j)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %kt : memref<2x50x8x64xf32>, memref<2x8x64x50xf32>) outs(%s : memref<2x8x50x50xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}
func.func @columns_96(%a: memref<40x64xf32>, %b: memref<64x96xf32>, %c: memref<40x96xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>,
                                   affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<40x64xf32>, memref<64x96xf32>) outs(%c : memref<40x96xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}
