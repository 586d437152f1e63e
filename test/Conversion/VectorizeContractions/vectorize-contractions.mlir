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
// multiply-adds or more) splits its column blocks across threads.
// CHECK-LABEL: func.func @matmul_masked_tail
// CHECK: vector.create_mask
// CHECK: vector.maskedload
// CHECK: vector.maskedstore
// PAR-LABEL: func.func @matmul_masked_tail
// PAR: scf.parallel
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
