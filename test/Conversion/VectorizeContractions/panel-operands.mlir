// RUN: vmoe-opt %s -split-input-file -vmoe-vectorize-contractions | FileCheck %s
// RUN: vmoe-opt %s -split-input-file \
// RUN:   -vmoe-vectorize-contractions="vector-width=16 tile-rows=8 tile-vectors=3 parallel=true" \
// RUN:   | FileCheck %s --check-prefix=WIDE
// RUN: vmoe-opt %s -split-input-file -vmoe-vectorize-contractions="prefetch=true" \
// RUN:   | FileCheck %s --check-prefix=PREFETCH
// RUN: vmoe-opt %s -split-input-file -vmoe-vectorize-contractions \
// RUN:   | not grep memref.prefetch

// Constant weights packed once: B read through the panel map
// (n floordiv 16, k, n mod 16) is streamed from the panels in place: no
// packing scratch, no packing copy, every B vector a load of the panels at
// [n / 16, k, n % 16] (the panel clamped to the last one for columns past
// N, which are masked out of every store).
// CHECK-LABEL: func.func @matmul_b_in_panels
// CHECK-NOT: memref.alloc
// CHECK: scf.for
// CHECK:   arith.minsi
// CHECK:   vector.load %{{.*}} : memref<3x32x16xf32>, vector<8xf32>
// CHECK:   memref.load %{{.*}} : memref<8x32xf32>
// CHECK:   vector.fma
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc
// CHECK: return
// WIDE-LABEL: func.func @matmul_b_in_panels
// WIDE-NOT: memref.alloc
// WIDE: vector.load %{{.*}} : memref<3x32x16xf32>, vector<16xf32>
// WIDE-NOT: memref.alloc
// WIDE: return
// With `prefetch`, every k step of a row tile also prefetches (read, L2)
// the same k of the next panel, one line per B vector (the panel index
// clamped to the last panel), so that the next panel's first tile finds
// its weights in cache. The next panel is 16 columns on when the GEMM has
// more rows than one tile (6), else 0 columns on (the lines the tile
// loads itself): a GEMM of one tile has no other tiles to hide the
// prefetch behind. Without `prefetch`, nothing is prefetched.
// PREFETCH-LABEL: func.func @matmul_b_in_panels
// PREFETCH: %[[ROWS:.*]] = arith.subi %c8, %c0
// PREFETCH: %[[SEVERAL:.*]] = arith.cmpi sgt, %[[ROWS]], %c6
// PREFETCH: %[[OFFSET:.*]] = arith.select %[[SEVERAL]], %c16{{.*}}, %c0{{.*}} : index
// PREFETCH: scf.for
// PREFETCH: %[[NEXT:.*]] = arith.addi %{{.*}}, %[[OFFSET]] : index
// PREFETCH: arith.divui %[[NEXT]], %c16
// PREFETCH: memref.prefetch %{{.*}}, read, locality<2>, data : memref<3x32x16xf32>
// PREFETCH-NEXT: arith.constant 8 : index
// PREFETCH: memref.prefetch %{{.*}}, read, locality<2>, data : memref<3x32x16xf32>
// PREFETCH-NOT: memref.prefetch
// PREFETCH: vector.fma
#mk = affine_map<(m, k, n) -> (m, k)>
#panels = affine_map<(m, k, n) -> (n floordiv 16, k, n mod 16)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @matmul_b_in_panels(%a: memref<8x32xf32>, %p: memref<3x32x16xf32>, %c: memref<8x48xf32>) {
  linalg.generic {indexing_maps = [#mk, #panels, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<8x32xf32>, memref<3x32x16xf32>) outs(%c : memref<8x48xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Left alone: a dense contraction over panels and several blocks of k
// (K = 1100) keeps k blocks outside even with one row tile (4 rows); only
// the expert GEMMs of fused_experts swap the order at run time
// (GemmAccessors::oneTileByPanels).
// CHECK-LABEL: func.func @one_tile_k_blocks
// CHECK-NOT: arith.cmpi sle
// CHECK: scf.for %{{.*}} = %{{.*}} to %c1100 step %c512
// CHECK-NOT: arith.cmpi sle
// CHECK: vector.load %{{.*}} : memref<3x1100x16xf32>, vector<8xf32>
// CHECK-NOT: arith.cmpi sle
// CHECK: return
#mk = affine_map<(m, k, n) -> (m, k)>
#panels = affine_map<(m, k, n) -> (n floordiv 16, k, n mod 16)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @one_tile_k_blocks(%a: memref<4x1100xf32>, %p: memref<3x1100x16xf32>, %c: memref<4x48xf32>) {
  linalg.generic {indexing_maps = [#mk, #panels, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<4x1100xf32>, memref<3x1100x16xf32>) outs(%c : memref<4x48xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// N = 40 in 3 panels (the last one zero-padded past N): C is masked, B is
// not. The panels of a batched (expert) matmul carry the batch dim first.
// CHECK-LABEL: func.func @expert_matmul_b_in_panels
// CHECK-NOT: memref.alloc
// CHECK: vector.create_mask
// CHECK: vector.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<2x3x32x16xf32>, vector<8xf32>
// CHECK: vector.maskedstore
// CHECK-NOT: memref.alloc
// CHECK: return
#in = affine_map<(e, g, b, k, n) -> (e, g, b, k)>
#w = affine_map<(e, g, b, k, n) -> (e, n floordiv 16, k, n mod 16)>
#out = affine_map<(e, g, b, k, n) -> (e, g, b, n)>
func.func @expert_matmul_b_in_panels(%x: memref<2x1x5x32xf32>, %p: memref<2x3x32x16xf32>, %c: memref<2x1x5x40xf32>) {
  linalg.generic {indexing_maps = [#in, #w, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%x, %p : memref<2x1x5x32xf32>, memref<2x3x32x16xf32>) outs(%c : memref<2x1x5x40xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Left alone: a plain B (activations, e.g. attention's kT) is still packed
// per call, into a scratch on the stack; panels of 8 floats cannot feed 16-lane vectors
// (16 lanes: the generic stays for convert-linalg-to-loops).
// CHECK-LABEL: func.func @plain_b_and_narrow_panels
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<16x512x16xf32>
// CHECK-NOT: linalg.generic
// CHECK: return
// WIDE-LABEL: func.func @plain_b_and_narrow_panels
// WIDE: memref.alloca() {alignment = 64 : i64} : memref<5x512x48xf32>
// WIDE: linalg.generic
// WIDE-SAME: ins(%{{.*}}, %{{.*}} : memref<4x32xf32>, memref<2x32x8xf32>)
#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#panels8 = affine_map<(m, k, n) -> (n floordiv 8, k, n mod 8)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @plain_b_and_narrow_panels(%a: memref<4x32xf32>, %b: memref<32x16xf32>, %c: memref<4x16xf32>,
                                     %p: memref<2x32x8xf32>, %d: memref<4x16xf32>) {
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<4x32xf32>, memref<32x16xf32>) outs(%c : memref<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#mk, #panels8, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<4x32xf32>, memref<2x32x8xf32>) outs(%d : memref<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Panels are read a vector at a time, so the tile is the one that pads
// fewest columns: with AVX-512's 8 x 3 (48 columns) N = 64 would compute
// 96 columns in two panels; 6 x 4 computes it in one (tileForColumns), as
// for B packed per call (batched-tiles.mlir).
// WIDE-LABEL: func.func @panels_take_the_wide_tile
// WIDE-NOT: memref.alloc
// WIDE: scf.for {{.*}} step %c6
// WIDE-COUNT-4: vector.load %{{.*}} : memref<4x32x16xf32>, vector<16xf32>
// WIDE-COUNT-24: vector.fma
// WIDE: return
#mk = affine_map<(m, k, n) -> (m, k)>
#panels = affine_map<(m, k, n) -> (n floordiv 16, k, n mod 16)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @panels_take_the_wide_tile(%a: memref<12x32xf32>, %p: memref<4x32x16xf32>, %c: memref<12x64xf32>) {
  linalg.generic {indexing_maps = [#mk, #panels, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<12x32xf32>, memref<4x32x16xf32>) outs(%c : memref<12x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// With `prefetch`, a weight GEMM whose epilogue adds a residual also
// fetches, at the start of each tile's last block of k, every line the
// epilogue will touch: C's for writing (prefetchw) and the residual's
// into L2 (read, locality 2: the tile streams more B than L1 holds). The
// bias, read along the columns only, is not prefetched. Without
// `prefetch` (the RUN line above) nothing is.
// PREFETCH-LABEL: func.func @panels_residual_epilogue
// PREFETCH: scf.if
// PREFETCH: memref.prefetch %[[C:.*]][%{{.*}}, %{{.*}}], write, locality<3>, data : memref<8x32xf32>
// PREFETCH-NEXT: memref.prefetch %[[X:.*]][%{{.*}}, %{{.*}}], read, locality<2>, data : memref<8x32xf32>
// PREFETCH-NOT: memref<32xf32>
// PREFETCH: scf.for
// PREFETCH: vector.fma
// PREFETCH: vector.store %{{.*}}, %[[C]]
#mk = affine_map<(m, k, n) -> (m, k)>
#panels = affine_map<(m, k, n) -> (n floordiv 16, k, n mod 16)>
#mn = affine_map<(m, k, n) -> (m, n)>
#row = affine_map<(m, n) -> (n)>
#id = affine_map<(m, n) -> (m, n)>
func.func @panels_residual_epilogue(%a: memref<8x32xf32>, %p: memref<2x32x16xf32>, %c: memref<8x32xf32>,
                                    %bias: memref<32xf32>, %x: memref<8x32xf32>) {
  linalg.generic {indexing_maps = [#mk, #panels, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<8x32xf32>, memref<2x32x16xf32>) outs(%c : memref<8x32xf32>) {
  ^bb0(%u: f32, %v: f32, %acc: f32):
    %m = arith.mulf %u, %v : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%bias, %x : memref<32xf32>, memref<8x32xf32>) outs(%c : memref<8x32xf32>) {
  ^bb0(%b: f32, %r: f32, %acc: f32):
    %s = arith.addf %acc, %b : f32
    %t = arith.addf %s, %r : f32
    linalg.yield %t : f32
  }
  return
}
