// RUN: vmoe-opt %s -split-input-file \
// RUN:   -vmoe-vectorize-contractions="vector-width=16 tile-rows=8 tile-vectors=3 bf16-dot=true" \
// RUN:   | FileCheck %s --check-prefix=DOT
// RUN: vmoe-opt %s -split-input-file -vmoe-vectorize-contractions | FileCheck %s --check-prefix=SHIFT
// RUN: vmoe-opt %s -split-input-file \
// RUN:   -vmoe-vectorize-contractions="vector-width=16 tile-rows=8 tile-vectors=3 bf16-dot=true parallel=true" \
// RUN:   | FileCheck %s --check-prefix=PAR

// A bf16 pair contraction (a dense kernel stored as bf16 pair panels,
// folded by convert-vmoe-to-scf): per block of rows, the A rows are rounded
// to pair words into a stack scratch (memref<R x ceil(K/2) x i32>, R rows
// of at most 128 KB), then the microkernel steps over pairs of k, reading
// B's words from the panels in place: vdpbf16ps with bf16-dot, else the
// even k (shli 16) and odd k (andi 0xffff0000) as f32 fmas. No packing
// scratch of B, no heap allocation, and the linalg.generic is gone.
// DOT-LABEL: func.func @dense_bf16_pairs
// DOT-NOT: linalg.generic
// DOT-NOT: memref.alloc(
// DOT: llvm.intr.stacksave
// DOT: memref.alloca() {alignment = 64 : i64} : memref<{{[0-9]+}}x16xi32>
// DOT: vector.maskedload %{{.*}} : memref<40x32xf32>, vector<32xi1>, vector<32xf32> into vector<32xf32>
// DOT: arith.truncf %{{.*}} : vector<32xf32> to vector<32xbf16>
// DOT: vector.maskedstore %{{.*}} : memref<{{[0-9]+}}x16xi32>, vector<16xi1>, vector<16xi32>
// DOT: vector.load %{{.*}} : memref<3x16x16xf32>, vector<16xf32>
// DOT: vector.bitcast %{{.*}} : vector<16xf32> to vector<16xi32>
// DOT: memref.load %{{.*}} : memref<{{[0-9]+}}x16xi32>
// DOT: x86vector.avx512.dot %{{.*}}, %{{.*}}, %{{.*}} : vector<32xbf16> -> vector<16xf32>
// DOT-NOT: vector.fma
// DOT: llvm.intr.stackrestore
// DOT-NOT: linalg.generic
// DOT: return
// SHIFT-LABEL: func.func @dense_bf16_pairs
// PAR-LABEL: func.func @dense_bf16_pairs(
// PAR-NOT: scf.parallel
// SHIFT-NOT: x86vector
// SHIFT-NOT: arith.truncf
// SHIFT: memref.alloca() {alignment = 64 : i64} : memref<{{[0-9]+}}x16xi32>
// SHIFT: vector.load %{{.*}} : memref<3x16x16xf32>, vector<8xf32>
// SHIFT: %[[WORDS:.*]] = vector.bitcast %{{.*}} : vector<8xf32> to vector<8xi32>
// SHIFT: arith.shli %[[WORDS]], %{{.*}} : vector<8xi32>
// SHIFT: arith.andi %[[WORDS]], %{{.*}} : vector<8xi32>
// SHIFT: vector.fma
// SHIFT-NOT: x86vector
// SHIFT-NOT: linalg.generic
// SHIFT: return
#mk = affine_map<(m, k, n) -> (m, k)>
#pairs = affine_map<(m, k, n) -> (n floordiv 16, k floordiv 2, n mod 16)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @dense_bf16_pairs(%a: memref<40x32xf32>, %p: memref<3x16x16xf32>, %c: memref<40x48xf32>) {
  linalg.generic {indexing_maps = [#mk, #pairs, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<40x32xf32>, memref<3x16x16xf32>) outs(%c : memref<40x48xf32>) {
  ^bb0(%x: f32, %word: f32, %acc: f32):
    %k = linalg.index 1 : index
    %c2 = arith.constant 2 : index
    %rem = arith.remui %k, %c2 : index
    %c0 = arith.constant 0 : index
    %odd = arith.cmpi ne, %rem, %c0 : index
    %bits = arith.bitcast %word : f32 to i32
    %mask = arith.constant -65536 : i32
    %high = arith.andi %bits, %mask : i32
    %c16 = arith.constant 16 : i32
    %low = arith.shli %bits, %c16 : i32
    %half = arith.select %odd, %high, %low : i32
    %w = arith.bitcast %half : i32 to f32
    %t = arith.truncf %x : f32 to bf16
    %r = arith.extf %t : bf16 to f32
    %m = arith.mulf %r, %w : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

/// Blocks of rows: K = 1536 (768 words, 3 KB a row) gives blocks of 42
/// rows (SHIFT, tile rows 6) or 40 (DOT, tile rows 8) within 128 KB.
// DOT-LABEL: func.func @dense_bf16_pairs_row_blocks
// DOT: %[[R:.*]] = arith.constant 40 : index
// DOT: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[R]]
// DOT: memref.alloca() {alignment = 64 : i64} : memref<40x768xi32>
// SHIFT-LABEL: func.func @dense_bf16_pairs_row_blocks
// SHIFT: memref.alloca() {alignment = 64 : i64} : memref<42x768xi32>
/// With `parallel`, a large pair GEMM (2^20 multiply-adds or more) splits
/// its blocks of rows across threads: each rounds its own rows on its own
/// stack and runs every column of them (one writer per row of C). The
/// blocks are a multiple of omp_get_max_threads() in number (at least the
/// 13 tiles of 8 rows / 5 tiles per block = 3) and block i holds tiles
/// [i * 13 / blocks, (i + 1) * 13 / blocks).
// PAR: func.func private @omp_get_max_threads() -> i32
// PAR-LABEL: func.func @dense_bf16_pairs_row_blocks
// PAR: %[[OMP:.*]] = call @omp_get_max_threads() : () -> i32
// PAR: %[[ATLEAST1:.*]] = arith.maxsi %[[OMP]]
// PAR: %[[THREADS:.*]] = arith.index_castui %[[ATLEAST1]] : i32 to index
// PAR: %[[C8:.*]] = arith.constant 8 : index
// PAR: %[[TILES:.*]] = arith.ceildivui %c100, %[[C8]] : index
// PAR: %[[C5:.*]] = arith.constant 5 : index
// PAR: %[[FEWEST:.*]] = arith.ceildivui %[[TILES]], %[[C5]] : index
// PAR: %[[PER:.*]] = arith.ceildivui %[[FEWEST]], %[[THREADS]] : index
// PAR: %[[ROUNDED:.*]] = arith.muli %[[PER]], %[[THREADS]] : index
// PAR: %[[BLOCKS:.*]] = arith.minui %[[ROUNDED]], %[[TILES]] : index
// PAR: scf.parallel (%[[I:.*]]) = (%{{.*}}) to (%[[BLOCKS]]) step (%{{.*}})
// PAR: %[[T0:.*]] = arith.muli %[[I]], %[[TILES]] : index
// PAR: %[[FIRST:.*]] = arith.divui %[[T0]], %[[BLOCKS]] : index
// PAR: %[[R0:.*]] = arith.muli %[[FIRST]], %[[C8]] : index
// PAR: arith.minui %[[R0]], %c100 : index
// PAR: llvm.intr.stacksave
// PAR: memref.alloca() {alignment = 64 : i64} : memref<40x768xi32>
// PAR-NOT: scf.parallel
// PAR: llvm.intr.stackrestore
#mk = affine_map<(m, k, n) -> (m, k)>
#pairs = affine_map<(m, k, n) -> (n floordiv 16, k floordiv 2, n mod 16)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @dense_bf16_pairs_row_blocks(%a: memref<100x1536xf32>, %p: memref<1x768x16xf32>, %c: memref<100x16xf32>) {
  linalg.generic {indexing_maps = [#mk, #pairs, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<100x1536xf32>, memref<1x768x16xf32>) outs(%c : memref<100x16xf32>) {
  ^bb0(%x: f32, %word: f32, %acc: f32):
    %k = linalg.index 1 : index
    %c2 = arith.constant 2 : index
    %rem = arith.remui %k, %c2 : index
    %c0 = arith.constant 0 : index
    %odd = arith.cmpi ne, %rem, %c0 : index
    %bits = arith.bitcast %word : f32 to i32
    %mask = arith.constant -65536 : i32
    %high = arith.andi %bits, %mask : i32
    %c16 = arith.constant 16 : i32
    %low = arith.shli %bits, %c16 : i32
    %half = arith.select %odd, %high, %low : i32
    %w = arith.bitcast %half : i32 to f32
    %t = arith.truncf %x : f32 to bf16
    %r = arith.extf %t : bf16 to f32
    %m = arith.mulf %r, %w : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

/// A pair panel map whose body is not the pair product (here the word's
/// bits taken as the weight, no halves): left for convert-linalg-to-loops,
/// never read as pairs. Without bf16-dot (SHIFT) the bf16 rounding of a
/// pair contraction that stays is expanded to integer arithmetic (no
/// arith.truncf left for targets without bf16 conversions); with it (DOT)
/// truncf stays (vcvtneps2bf16).
// DOT-LABEL: func.func @negative_pair_map_other_body
// DOT: linalg.generic
// DOT: arith.truncf %{{.*}} : f32 to bf16
// DOT-NOT: x86vector
// DOT: return
// SHIFT-LABEL: func.func @negative_pair_map_other_body
// SHIFT: linalg.generic
// SHIFT-NOT: arith.truncf
// SHIFT-NOT: vector.fma
// SHIFT: return
#mk = affine_map<(m, k, n) -> (m, k)>
#pairs = affine_map<(m, k, n) -> (n floordiv 16, k floordiv 2, n mod 16)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @negative_pair_map_other_body(%a: memref<8x32xf32>, %p: memref<3x16x16xf32>, %c: memref<8x48xf32>) {
  linalg.generic {indexing_maps = [#mk, #pairs, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<8x32xf32>, memref<3x16x16xf32>) outs(%c : memref<8x48xf32>) {
  ^bb0(%x: f32, %word: f32, %acc: f32):
    %t = arith.truncf %x : f32 to bf16
    %r = arith.extf %t : bf16 to f32
    %m = arith.mulf %r, %word : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

/// Pair panels take the tile that pads fewest columns too: N = 64 runs as
/// 6 x 4 (one 64-wide panel) rather than 8 x 3 (96 columns in two); the
/// blocks of rows are then multiples of 6 (K = 1536: 42 rows).
// DOT-LABEL: func.func @pairs_take_the_wide_tile
// DOT: %[[R:.*]] = arith.constant 42 : index
// DOT: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[R]]
// DOT: memref.alloca() {alignment = 64 : i64} : memref<42x768xi32>
// DOT: scf.for {{.*}} step %c6
// DOT-COUNT-4: vector.load %{{.*}} : memref<4x768x16xf32>, vector<16xf32>
// DOT-COUNT-24: x86vector.avx512.dot
#mk = affine_map<(m, k, n) -> (m, k)>
#pairs = affine_map<(m, k, n) -> (n floordiv 16, k floordiv 2, n mod 16)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @pairs_take_the_wide_tile(%a: memref<100x1536xf32>, %p: memref<4x768x16xf32>, %c: memref<100x64xf32>) {
  linalg.generic {indexing_maps = [#mk, #pairs, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<100x1536xf32>, memref<4x768x16xf32>) outs(%c : memref<100x64xf32>) {
  ^bb0(%x: f32, %word: f32, %acc: f32):
    %k = linalg.index 1 : index
    %c2 = arith.constant 2 : index
    %rem = arith.remui %k, %c2 : index
    %c0 = arith.constant 0 : index
    %odd = arith.cmpi ne, %rem, %c0 : index
    %bits = arith.bitcast %word : f32 to i32
    %mask = arith.constant -65536 : i32
    %high = arith.andi %bits, %mask : i32
    %c16 = arith.constant 16 : i32
    %low = arith.shli %bits, %c16 : i32
    %half = arith.select %odd, %high, %low : i32
    %w = arith.bitcast %half : i32 to f32
    %t = arith.truncf %x : f32 to bf16
    %r = arith.extf %t : bf16 to f32
    %m = arith.mulf %r, %w : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A stored as bf16 (a dense MLP's hidden, rounded by the first GEMM): its
// rows are pair words already, so no scratch and no rounding pass; the
// microkernel reads each word in place (two bf16 loaded as one i32).
// DOT-LABEL: func.func @dense_bf16_pairs_a_in_bf16
// DOT-NOT: memref.alloca
// DOT-NOT: arith.truncf
// DOT: vector.load %{{.*}} : memref<40x32xbf16>, vector<2xbf16>
// DOT-NEXT: vector.bitcast %{{.*}} : vector<2xbf16> to vector<1xi32>
// DOT: x86vector.avx512.dot
// DOT-NOT: linalg.generic
// DOT: return
// SHIFT-LABEL: func.func @dense_bf16_pairs_a_in_bf16
// SHIFT-NOT: memref.alloca
// SHIFT: vector.load %{{.*}} : memref<40x32xbf16>, vector<2xbf16>
// SHIFT: vector.fma
// SHIFT-NOT: linalg.generic
// SHIFT: return
#mk = affine_map<(m, k, n) -> (m, k)>
#pairs = affine_map<(m, k, n) -> (n floordiv 16, k floordiv 2, n mod 16)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @dense_bf16_pairs_a_in_bf16(%a: memref<40x32xbf16>, %p: memref<3x16x16xf32>, %c: memref<40x48xf32>) {
  linalg.generic {indexing_maps = [#mk, #pairs, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<40x32xbf16>, memref<3x16x16xf32>) outs(%c : memref<40x48xf32>) {
  ^bb0(%x: bf16, %word: f32, %acc: f32):
    %k = linalg.index 1 : index
    %c2 = arith.constant 2 : index
    %rem = arith.remui %k, %c2 : index
    %c0 = arith.constant 0 : index
    %odd = arith.cmpi ne, %rem, %c0 : index
    %bits = arith.bitcast %word : f32 to i32
    %mask = arith.constant -65536 : i32
    %high = arith.andi %bits, %mask : i32
    %c16 = arith.constant 16 : i32
    %low = arith.shli %bits, %c16 : i32
    %half = arith.select %odd, %high, %low : i32
    %w = arith.bitcast %half : i32 to f32
    %r = arith.extf %x : bf16 to f32
    %m = arith.mulf %r, %w : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// An odd K with A in bf16 would read half a word past each row: left to
// the loops.
// DOT-LABEL: func.func @negative_a_in_bf16_odd_k
// DOT: linalg.generic
// SHIFT-LABEL: func.func @negative_a_in_bf16_odd_k
// SHIFT: linalg.generic
#mk = affine_map<(m, k, n) -> (m, k)>
#pairs = affine_map<(m, k, n) -> (n floordiv 16, k floordiv 2, n mod 16)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @negative_a_in_bf16_odd_k(%a: memref<8x9xbf16>, %p: memref<1x5x16xf32>, %c: memref<8x16xf32>) {
  linalg.generic {indexing_maps = [#mk, #pairs, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<8x9xbf16>, memref<1x5x16xf32>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: bf16, %word: f32, %acc: f32):
    %k = linalg.index 1 : index
    %c2 = arith.constant 2 : index
    %rem = arith.remui %k, %c2 : index
    %c0 = arith.constant 0 : index
    %odd = arith.cmpi ne, %rem, %c0 : index
    %bits = arith.bitcast %word : f32 to i32
    %mask = arith.constant -65536 : i32
    %high = arith.andi %bits, %mask : i32
    %c16 = arith.constant 16 : i32
    %low = arith.shli %bits, %c16 : i32
    %half = arith.select %odd, %high, %low : i32
    %w = arith.bitcast %half : i32 to f32
    %r = arith.extf %x : bf16 to f32
    %m = arith.mulf %r, %w : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// An epilogue out of place: the bias and an activation read C and write a
// bf16 buffer of C's shape, ending in the rounding (a dense MLP's hidden).
// It folds like one in place: the registers get the bias, the rounding
// (vcvtneps2bf16 with bf16-dot; integer arithmetic without, so that no
// truncf is left for a runtime call) and go to the bf16 buffer; C holds
// only partial sums between blocks of k.
// DOT-LABEL: func.func @epilogue_into_bf16
// DOT-SAME: %[[C:[^:]*]]: memref<40x48xf32>, %{{.*}}: memref<48xf32>, %[[D:[^:]*]]: memref<40x48xbf16>
// DOT-NOT: linalg.generic
// DOT: x86vector.avx512.dot
// DOT: arith.addf %{{.*}} : vector<16xf32>
// DOT: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// DOT: vector.{{(masked)?}}store %{{.*}}, %[[D]]{{.*}} : memref<40x48xbf16>, vector<16xbf16>
// DOT-NOT: linalg.generic
// DOT: return
// SHIFT-LABEL: func.func @epilogue_into_bf16
// SHIFT-NOT: arith.truncf
// SHIFT-NOT: linalg.generic
// SHIFT: return
#mk = affine_map<(m, k, n) -> (m, k)>
#pairs = affine_map<(m, k, n) -> (n floordiv 16, k floordiv 2, n mod 16)>
#mn = affine_map<(m, k, n) -> (m, n)>
#col = affine_map<(m, n) -> (n)>
#id = affine_map<(m, n) -> (m, n)>
func.func @epilogue_into_bf16(%a: memref<40x32xf32>, %p: memref<3x16x16xf32>, %c: memref<40x48xf32>,
                              %bias: memref<48xf32>, %d: memref<40x48xbf16>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#mk, #pairs, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<40x32xf32>, memref<3x16x16xf32>) outs(%c : memref<40x48xf32>) {
  ^bb0(%x: f32, %word: f32, %acc: f32):
    %k = linalg.index 1 : index
    %c2 = arith.constant 2 : index
    %rem = arith.remui %k, %c2 : index
    %c0 = arith.constant 0 : index
    %odd = arith.cmpi ne, %rem, %c0 : index
    %bits = arith.bitcast %word : f32 to i32
    %mask = arith.constant -65536 : i32
    %high = arith.andi %bits, %mask : i32
    %c16 = arith.constant 16 : i32
    %low = arith.shli %bits, %c16 : i32
    %half = arith.select %odd, %high, %low : i32
    %w = arith.bitcast %half : i32 to f32
    %t = arith.truncf %x : f32 to bf16
    %r = arith.extf %t : bf16 to f32
    %m = arith.mulf %r, %w : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<40x48xf32>, memref<48xf32>) outs(%d : memref<40x48xbf16>) {
  ^bb0(%v: f32, %b: f32, %out: bf16):
    %s = arith.addf %v, %b : f32
    %relu = arith.maximumf %s, %zero : f32
    %h = arith.truncf %relu : f32 to bf16
    linalg.yield %h : bf16
  }
  return
}

// -----

// Out of place but not a rounding to bf16 (an f32 copy elsewhere): not an
// epilogue, it stays a pass of its own after the GEMM.
// DOT-LABEL: func.func @negative_epilogue_into_f32_copy
// DOT: x86vector.avx512.dot
// DOT: linalg.generic
// DOT: return
#mk = affine_map<(m, k, n) -> (m, k)>
#pairs = affine_map<(m, k, n) -> (n floordiv 16, k floordiv 2, n mod 16)>
#mn = affine_map<(m, k, n) -> (m, n)>
#col = affine_map<(m, n) -> (n)>
#id = affine_map<(m, n) -> (m, n)>
func.func @negative_epilogue_into_f32_copy(%a: memref<40x32xf32>, %p: memref<3x16x16xf32>, %c: memref<40x48xf32>,
                                           %bias: memref<48xf32>, %d: memref<40x48xf32>) {
  linalg.generic {indexing_maps = [#mk, #pairs, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<40x32xf32>, memref<3x16x16xf32>) outs(%c : memref<40x48xf32>) {
  ^bb0(%x: f32, %word: f32, %acc: f32):
    %k = linalg.index 1 : index
    %c2 = arith.constant 2 : index
    %rem = arith.remui %k, %c2 : index
    %c0 = arith.constant 0 : index
    %odd = arith.cmpi ne, %rem, %c0 : index
    %bits = arith.bitcast %word : f32 to i32
    %mask = arith.constant -65536 : i32
    %high = arith.andi %bits, %mask : i32
    %c16 = arith.constant 16 : i32
    %low = arith.shli %bits, %c16 : i32
    %half = arith.select %odd, %high, %low : i32
    %w = arith.bitcast %half : i32 to f32
    %t = arith.truncf %x : f32 to bf16
    %r = arith.extf %t : bf16 to f32
    %m = arith.mulf %r, %w : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<40x48xf32>, memref<48xf32>) outs(%d : memref<40x48xf32>) {
  ^bb0(%v: f32, %b: f32, %out: f32):
    %s = arith.addf %v, %b : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The bf16 destination allocated between the contraction and its
// epilogue (as bufferization leaves a first layer's hidden): the
// allocation moves above the GEMM, which stores into it.
// DOT-LABEL: func.func @epilogue_into_bf16_allocated_after
// DOT: %[[D:.*]] = memref.alloc() {alignment = 64 : i64} : memref<40x48xbf16>
// DOT: x86vector.avx512.dot
// DOT: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// DOT: vector.{{(masked)?}}store %{{.*}}, %[[D]]{{.*}} : memref<40x48xbf16>, vector<16xbf16>
// DOT-NOT: linalg.generic
// DOT: return %[[D]]
#mk = affine_map<(m, k, n) -> (m, k)>
#pairs = affine_map<(m, k, n) -> (n floordiv 16, k floordiv 2, n mod 16)>
#mn = affine_map<(m, k, n) -> (m, n)>
#col = affine_map<(m, n) -> (n)>
#id = affine_map<(m, n) -> (m, n)>
func.func @epilogue_into_bf16_allocated_after(%a: memref<40x32xf32>, %p: memref<3x16x16xf32>, %c: memref<40x48xf32>,
                                              %bias: memref<48xf32>) -> memref<40x48xbf16> {
  linalg.generic {indexing_maps = [#mk, #pairs, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %p : memref<40x32xf32>, memref<3x16x16xf32>) outs(%c : memref<40x48xf32>) {
  ^bb0(%x: f32, %word: f32, %acc: f32):
    %k = linalg.index 1 : index
    %c2 = arith.constant 2 : index
    %rem = arith.remui %k, %c2 : index
    %c0 = arith.constant 0 : index
    %odd = arith.cmpi ne, %rem, %c0 : index
    %bits = arith.bitcast %word : f32 to i32
    %mask = arith.constant -65536 : i32
    %high = arith.andi %bits, %mask : i32
    %c16 = arith.constant 16 : i32
    %low = arith.shli %bits, %c16 : i32
    %half = arith.select %odd, %high, %low : i32
    %w = arith.bitcast %half : i32 to f32
    %t = arith.truncf %x : f32 to bf16
    %r = arith.extf %t : bf16 to f32
    %m = arith.mulf %r, %w : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %d = memref.alloc() {alignment = 64 : i64} : memref<40x48xbf16>
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<40x48xf32>, memref<48xf32>) outs(%d : memref<40x48xbf16>) {
  ^bb0(%v: f32, %b: f32, %out: bf16):
    %s = arith.addf %v, %b : f32
    %h = arith.truncf %s : f32 to bf16
    linalg.yield %h : bf16
  }
  return %d : memref<40x48xbf16>
}
