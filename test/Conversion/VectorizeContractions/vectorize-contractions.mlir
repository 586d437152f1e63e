// RUN: vmoe-opt %s -split-input-file -vmoe-vectorize-contractions | FileCheck %s
// RUN: vmoe-opt %s -split-input-file -vmoe-vectorize-contractions="parallel=true" \
// RUN:   | FileCheck %s --check-prefix=PAR

#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>

// A matmul with N a multiple of the panel (16): full panels only. Per block
// of 256 columns and 512 rows of B, B is packed into contiguous panels (a
// scratch of 512 KB on the stack: memref.alloca in a llvm.intr.stacksave
// per column block, no heap allocation), then
// a 6x2 register tile, starting from C, is fed by broadcasts of A and vector
// loads of the packed panel.
// CHECK-LABEL: func.func @matmul_full_panels
// CHECK-NOT: linalg.generic
// CHECK-NOT: memref.alloc(
// CHECK: scf.for %[[JC:.*]] = %{{.*}} to %{{.*}} step %{{.*}}
// CHECK:   llvm.intr.stacksave
// CHECK:   %[[PACKED:.*]] = memref.alloca() {alignment = 64 : i64} : memref<16x512x16xf32>
// CHECK:   scf.for
// CHECK:     vector.load %{{.*}} : memref<64x32xf32>, vector<8xf32>
// CHECK:     vector.store %{{.*}}, %[[PACKED]]
// CHECK:     scf.for {{.*}} step %c6
// CHECK:       scf.if
// CHECK:         vector.load %{{.*}} : memref<12x32xf32>, vector<8xf32>
// CHECK:       scf.for {{.*}} iter_args(
// CHECK-COUNT-2: vector.load %[[PACKED]]
// CHECK:         memref.load %{{.*}} : memref<12x64xf32>
// CHECK:         vector.broadcast
// CHECK-COUNT-2: vector.fma
// CHECK:       vector.store
// CHECK-NOT: memref.dealloc
// CHECK-NOT: vector.maskedload
// PAR-LABEL: func.func @matmul_full_panels
// PAR-NOT: scf.parallel
func.func @matmul_full_panels(%a: memref<12x64xf32>, %b: memref<64x32xf32>, %c: memref<12x32xf32>) {
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x64xf32>, memref<64x32xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>

// N = 10 is not a multiple of 16: lanes past N are masked when packing B
// (read as zeros) and when loading and storing C. A large contraction (2^20
// multiply-adds or more) splits its work across threads; with one panel of
// columns (N <= 16) that is blocks of row tiles (6 rows), one per thread
// (omp_get_max_threads(), never more than the tiles), each block's tiles
// starting at its first row and packing all of B itself.
// CHECK-LABEL: func.func @matmul_masked_tail
// CHECK: vector.create_mask
// CHECK: vector.maskedload
// CHECK: vector.maskedstore
// PAR-LABEL: func.func @matmul_masked_tail
// PAR: %[[OMP:.*]] = call @omp_get_max_threads() : () -> i32
// PAR: %[[THREADS:.*]] = arith.index_castui
// PAR: %[[TILES:.*]] = arith.ceildivui %c1024, %c6{{.*}} : index
// PAR: %[[BLOCKS:.*]] = arith.minui %[[THREADS]], %[[TILES]] : index
// PAR: scf.parallel (%[[BLOCK:.*]]) = (%{{.*}}) to (%[[BLOCKS]])
// PAR: %[[FIRST:.*]] = arith.muli %[[BLOCK]], %[[TILES]] : index
// PAR: %[[START:.*]] = arith.minui %{{.*}}, %c1024{{.*}} : index
// PAR: %[[END:.*]] = arith.minui %{{.*}}, %c1024{{.*}} : index
// PAR: memref.alloca() {alignment = 64 : i64} : memref<16x512x16xf32>
// PAR: scf.for %{{.*}} = %[[START]] to %{{.*}} step %c6
func.func @matmul_masked_tail(%a: memref<1024x128xf32>, %b: memref<128x10xf32>, %c: memref<1024x10xf32>) {
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<1024x128xf32>, memref<128x10xf32>) outs(%c : memref<1024x10xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>

// More than one panel (N = 40: 3 panels of 16): the threads split the
// column blocks, at most 16 panels each, as many as a multiple of
// omp_get_max_threads() that keeps that bound, but never more than the
// panels; every block runs all the rows.
// PAR-LABEL: func.func @matmul_parallel_panels
// PAR: %[[OMP:.*]] = call @omp_get_max_threads() : () -> i32
// PAR: %[[THREADS:.*]] = arith.index_castui
// PAR: %[[PANELS:.*]] = arith.ceildivui %c40, %c16{{.*}} : index
// PAR: %[[FEWEST:.*]] = arith.ceildivui %[[PANELS]], %c16{{.*}} : index
// PAR: %[[PER:.*]] = arith.ceildivui %[[FEWEST]], %[[THREADS]] : index
// PAR: %[[ROUNDED:.*]] = arith.muli %[[PER]], %[[THREADS]] : index
// PAR: %[[BLOCKS:.*]] = arith.minui %[[ROUNDED]], %[[PANELS]] : index
// PAR: scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[BLOCKS]])
// PAR: scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c6
func.func @matmul_parallel_panels(%a: memref<1024x128xf32>, %b: memref<128x40xf32>, %c: memref<1024x40xf32>) {
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<1024x128xf32>, memref<128x40xf32>) outs(%c : memref<1024x40xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The expert contraction of expert_ffn: e and g become outer loops, b the
// rows of the microkernel.
// CHECK-LABEL: func.func @expert_batched
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     scf.for
// CHECK:       scf.for {{.*}} step %c6
// CHECK:         vector.fma
func.func @expert_batched(%in: memref<4x2x5x8xf32>, %w: memref<4x8x16xf32>, %out: memref<4x2x5x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(e, g, b, k, n) -> (e, g, b, k)>,
                                   affine_map<(e, g, b, k, n) -> (e, k, n)>,
                                   affine_map<(e, g, b, k, n) -> (e, g, b, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%in, %w : memref<4x2x5x8xf32>, memref<4x8x16xf32>) outs(%out : memref<4x2x5x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

/// B is not contiguous along N (q . k^T): left for convert-linalg-to-loops.
// CHECK-LABEL: func.func @negative_transposed_rhs
// CHECK: linalg.generic
// CHECK-NOT: vector.fma
func.func @negative_transposed_rhs(%q: memref<8x16xf32>, %k: memref<8x16xf32>, %s: memref<8x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j, c) -> (i, c)>, affine_map<(i, j, c) -> (j, c)>,
                                   affine_map<(i, j, c) -> (i, j)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<8x16xf32>, memref<8x16xf32>) outs(%s : memref<8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

/// Not a contraction (an elementwise add): left alone.
// CHECK-LABEL: func.func @negative_elementwise
// CHECK: linalg.generic
func.func @negative_elementwise(%a: memref<8x16xf32>, %b: memref<8x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<8x16xf32>) outs(%b : memref<8x16xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %acc, %x : f32
    linalg.yield %r : f32
  }
  return
}

// -----

/// Tensor semantics (before bufferization): left alone.
// CHECK-LABEL: func.func @negative_tensors
// CHECK: linalg.generic
func.func @negative_tensors(%a: tensor<12x64xf32>, %b: tensor<64x32xf32>, %c: tensor<12x32xf32>) -> tensor<12x32xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>,
                                        affine_map<(m, k, n) -> (m, n)>],
                       iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : tensor<12x64xf32>, tensor<64x32xf32>) outs(%c : tensor<12x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<12x32xf32>
  return %r : tensor<12x32xf32>
}

// -----

#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>

// C zero-filled right before (an allocation between): the fill goes and
// the first block of k starts from zero registers; C is loaded only for
// the partial sums of later blocks (K = 600: two blocks of 512 rows).
// CHECK-LABEL: func.func @matmul_zero_filled
// CHECK-NOT: linalg.fill
// CHECK: scf.if
// CHECK-NEXT: arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK-NOT: vector.load
// CHECK: } else {
// CHECK-NEXT: vector.load %{{.*}} : memref<12x32xf32>, vector<8xf32>
func.func @matmul_zero_filled(%a: memref<12x600xf32>, %b: memref<600x32xf32>) -> memref<12x32xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<12x32xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<12x32xf32>)
  %other = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x600xf32>, memref<600x32xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  memref.dealloc %other : memref<4xf32>
  return %c : memref<12x32xf32>
}

// -----

#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>

// Left alone: a fill of 1.0, a zero fill of another buffer, and a zero
// fill followed by a write to C before the contraction; each GEMM starts
// from C.
// CHECK-LABEL: func.func @matmul_fill_kept
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : memref<12x32xf32>)
// CHECK: scf.if
// CHECK-NEXT: vector.load %{{.*}} : memref<12x32xf32>, vector<8xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : memref<12x32xf32>)
// CHECK: scf.if
// CHECK-NEXT: vector.load %{{.*}} : memref<12x32xf32>, vector<8xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : memref<12x32xf32>)
// CHECK: memref.store
// CHECK: scf.if
// CHECK-NEXT: vector.load %{{.*}} : memref<12x32xf32>, vector<8xf32>
func.func @matmul_fill_kept(%a: memref<12x64xf32>, %b: memref<64x32xf32>, %c: memref<12x32xf32>, %d: memref<12x32xf32>, %e: memref<12x32xf32>) {
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %i = arith.constant 0 : index
  linalg.fill ins(%one : f32) outs(%c : memref<12x32xf32>)
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x64xf32>, memref<64x32xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%zero : f32) outs(%e : memref<12x32xf32>)
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x64xf32>, memref<64x32xf32>) outs(%d : memref<12x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%zero : f32) outs(%e : memref<12x32xf32>)
  memref.store %one, %e[%i, %i] : memref<12x32xf32>
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x64xf32>, memref<64x32xf32>) outs(%e : memref<12x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>
#n = affine_map<(m, n) -> (n)>
#m = affine_map<(m, n) -> (m)>
#id = affine_map<(m, n) -> (m, n)>

// An elementwise op finishing C in place right after the contraction (a
// bias along the columns, a scale per row, tanh) runs on the registers of
// the last block of k before they are stored: no pass of its own over C.
// The partial sums of earlier blocks are stored as they are.
// CHECK-LABEL: func.func @matmul_epilogue
// CHECK-NOT: linalg.generic
// CHECK: scf.if
// CHECK: vector.load %{{.*}} : memref<32xf32>, vector<8xf32>
// CHECK: memref.load %{{.*}} : memref<12xf32>
// CHECK: vector.broadcast
// CHECK: arith.addf {{.*}} : vector<8xf32>
// CHECK: arith.mulf {{.*}} : vector<8xf32>
// CHECK: math.tanh {{.*}} : vector<8xf32>
// CHECK: vector.store
// CHECK: } else {
// CHECK-NOT: math.tanh
// CHECK: vector.store
func.func @matmul_epilogue(%a: memref<12x600xf32>, %b: memref<600x32xf32>, %c: memref<12x32xf32>, %bias: memref<32xf32>, %scale: memref<12xf32>) {
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x600xf32>, memref<600x32xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#n, #m, #id], iterator_types = ["parallel", "parallel"]}
      ins(%bias, %scale : memref<32xf32>, memref<12xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%v: f32, %r: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    %t = arith.mulf %s, %r : f32
    %u = math.tanh %t : f32
    linalg.yield %u : f32
  }
  return
}

// -----

#bmk = affine_map<(e, m, k, n) -> (e, m, k)>
#bkn = affine_map<(e, m, k, n) -> (e, k, n)>
#bmn = affine_map<(e, m, k, n) -> (e, m, n)>
#bn = affine_map<(e, m, n) -> (e, n)>
#bid = affine_map<(e, m, n) -> (e, m, n)>
#id = affine_map<(m, n) -> (m, n)>

// A chain of epilogues applies in order: the bias, then a residual add
// into a collapsed view of C (a layer's [1, M, N] result seen as [M, N]:
// unit dims dropped, the same elements), reading the residual by vectors
// along C's columns. Both fold: the sums are (acc + bias) + residual, as
// the two passes computed them.
// CHECK-LABEL: func.func @matmul_epilogue_chain
// CHECK-NOT: linalg.generic
// CHECK: scf.if
// CHECK: vector.load %{{.*}} : memref<1x32xf32>, vector<8xf32>
// CHECK: %[[BIASED:.*]] = arith.addf {{.*}} : vector<8xf32>
// CHECK: %[[RES:.*]] = vector.load %{{.*}} : memref<12x32xf32>, vector<8xf32>
// CHECK: arith.addf %[[RES]], %[[BIASED]] : vector<8xf32>
// CHECK: vector.store
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @matmul_epilogue_chain(%a: memref<1x12x64xf32>, %b: memref<1x64x32xf32>, %c: memref<1x12x32xf32>, %bias: memref<1x32xf32>, %x: memref<12x32xf32>) {
  linalg.generic {indexing_maps = [#bmk, #bkn, #bmn], iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<1x12x64xf32>, memref<1x64x32xf32>) outs(%c : memref<1x12x32xf32>) {
  ^bb0(%u: f32, %v: f32, %acc: f32):
    %p = arith.mulf %u, %v : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#bn, #bid], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%bias : memref<1x32xf32>) outs(%c : memref<1x12x32xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  %flat = memref.collapse_shape %c [[0, 1], [2]] : memref<1x12x32xf32> into memref<12x32xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<12x32xf32>) outs(%flat : memref<12x32xf32>) {
  ^bb0(%r: f32, %acc: f32):
    %s = arith.addf %r, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>

// Not folded: a second link whose input is a view made after the
// contraction (the GEMM's loops could not read it): the bias folds, the
// residual add stays a pass of its own. Nor an op into a view of C that
// is not a collapse of unit dims (a subview, an expand_shape).
// CHECK-LABEL: func.func @matmul_epilogue_chain_stops
// CHECK: scf.for
// CHECK: memref.collapse_shape
// CHECK-NEXT: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK-LABEL: func.func @matmul_epilogue_views
// CHECK: scf.for
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT: linalg.generic
func.func @matmul_epilogue_chain_stops(%a: memref<12x64xf32>, %b: memref<64x32xf32>, %c: memref<12x32xf32>, %bias: memref<32xf32>, %x: memref<2x6x32xf32>) {
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x64xf32>, memref<64x32xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%u: f32, %v: f32, %acc: f32):
    %p = arith.mulf %u, %v : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n) -> (n)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%bias : memref<32xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  %late = memref.collapse_shape %x [[0, 1], [2]] : memref<2x6x32xf32> into memref<12x32xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%late : memref<12x32xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%r: f32, %acc: f32):
    %s = arith.addf %r, %acc : f32
    linalg.yield %s : f32
  }
  return
}
func.func @matmul_epilogue_views(%a: memref<12x64xf32>, %b: memref<64x32xf32>, %c: memref<12x32xf32>) {
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x64xf32>, memref<64x32xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%u: f32, %v: f32, %acc: f32):
    %p = arith.mulf %u, %v : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  %rows = memref.subview %c[0, 0] [6, 32] [1, 1] : memref<12x32xf32> to memref<6x32xf32, strided<[32, 1]>>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%rows : memref<6x32xf32, strided<[32, 1]>>) {
  ^bb0(%acc: f32):
    %s = arith.addf %acc, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x64xf32>, memref<64x32xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%u: f32, %v: f32, %acc: f32):
    %p = arith.mulf %u, %v : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  %split = memref.expand_shape %c [[0, 1], [2]] output_shape [2, 6, 32] : memref<12x32xf32> into memref<2x6x32xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j, n) -> (i, j, n)>], iterator_types = ["parallel", "parallel", "parallel"]}
      outs(%split : memref<2x6x32xf32>) {
  ^bb0(%acc: f32):
    %s = arith.addf %acc, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>

// An epilogue building a float from its bits (i32 ops: the 2^n of the
// logistic activations of bf16 pair GEMMs) is folded the same way, on
// vectors of i32; one on i64 is not (a pass of its own).
// CHECK-LABEL: func.func @matmul_epilogue_bits
// CHECK-NOT: linalg.generic
// CHECK: scf.if
// CHECK: arith.bitcast {{.*}} : vector<8xf32> to vector<8xi32>
// CHECK: arith.shli {{.*}} : vector<8xi32>
// CHECK: arith.bitcast {{.*}} : vector<8xi32> to vector<8xf32>
// CHECK: vector.store
// CHECK-LABEL: func.func @matmul_epilogue_i64
// CHECK: scf.for
// CHECK: linalg.generic
// CHECK: arith.fptosi {{.*}} : f32 to i64
func.func @matmul_epilogue_bits(%a: memref<12x64xf32>, %b: memref<64x32xf32>, %c: memref<12x32xf32>) {
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x64xf32>, memref<64x32xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  %c23 = arith.constant 23 : i32
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%c : memref<12x32xf32>) {
  ^bb0(%acc: f32):
    %bits = arith.bitcast %acc : f32 to i32
    %sh = arith.shli %bits, %c23 : i32
    %f = arith.bitcast %sh : i32 to f32
    linalg.yield %f : f32
  }
  return
}
func.func @matmul_epilogue_i64(%a: memref<12x64xf32>, %b: memref<64x32xf32>, %c: memref<12x32xf32>) {
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x64xf32>, memref<64x32xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%c : memref<12x32xf32>) {
  ^bb0(%acc: f32):
    %i = arith.fptosi %acc : f32 to i64
    %f = arith.sitofp %i : i64 to f32
    linalg.yield %f : f32
  }
  return
}

// -----

#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#t = affine_map<(m, n) -> (n, m)>

// Not an epilogue (each stays a linalg.generic after the GEMM): an op
// writing another buffer, one reading C itself, one reading an input
// transposed (its columns are not contiguous).
// CHECK-LABEL: func.func @matmul_no_epilogue
// CHECK-COUNT-3: linalg.generic
func.func @matmul_no_epilogue(%a: memref<12x64xf32>, %b: memref<64x32xf32>, %c: memref<12x32xf32>, %d: memref<12x32xf32>, %e: memref<32x12xf32>) {
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x64xf32>, memref<64x32xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<12x32xf32>) outs(%d : memref<12x32xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x64xf32>, memref<64x32xf32>) outs(%d : memref<12x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%d : memref<12x32xf32>) outs(%d : memref<12x32xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x64xf32>, memref<64x32xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%e : memref<32x12xf32>) outs(%c : memref<12x32xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  return
}
