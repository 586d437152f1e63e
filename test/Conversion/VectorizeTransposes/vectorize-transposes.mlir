// RUN: vmoe-opt %s -split-input-file -vmoe-vectorize-transposes | FileCheck %s
// RUN: vmoe-opt %s -split-input-file -vmoe-vectorize-transposes="parallel=true" \
// RUN:   | FileCheck %s --check-prefix=PAR
// RUN: vmoe-opt %s -split-input-file -vmoe-vectorize-transposes="vector-width=8" \
// RUN:   | FileCheck %s --check-prefix=NARROW

// A 2-D transpose whose rows (37) and columns (48) are not both multiples
// of 16: tiles of 16 x 16, the 16 input rows clamped to the last one and
// read whole (48 columns: no mask), a transpose by shuffles, the 16 output
// rows stored with the lanes past row 37 masked off.
// CHECK-LABEL: func.func @transpose_2d
// CHECK-NOT: linalg.generic
// CHECK: scf.for %[[B0:.*]] = %{{.*}} to %{{.*}} step %c16
// CHECK: scf.for %[[A0:.*]] = %{{.*}} to %{{.*}} step %c16
// CHECK: vector.create_mask %{{.*}} : vector<16xi1>
// CHECK: arith.minsi
// CHECK: vector.load %{{.*}} : memref<37x48xf32>, vector<16xf32>
// CHECK-NOT: vector.transpose
// CHECK: vector.shuffle
// CHECK: vector.maskedstore %{{.*}} : memref<48x37xf32>, vector<16xi1>, vector<16xf32>
// CHECK-NOT: scf.if
// CHECK: return
// NARROW-LABEL: func.func @transpose_2d
// NARROW: linalg.generic
// NARROW-NOT: vector.
func.func @transpose_2d(%x: memref<37x48xf32>, %y: memref<48x37xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j, i)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<37x48xf32>) outs(%y : memref<48x37xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// Columns not a multiple of 16 (20): masked loads, and the transposed rows
// past the columns left are not stored (scf.if).
// CHECK-LABEL: func.func @transpose_column_edge
// CHECK: vector.maskedload %{{.*}} : memref<32x20xf32>, vector<16xi1>, vector<16xf32> into vector<16xf32>
// CHECK: scf.if
// CHECK:   vector.store %{{.*}} : memref<20x32xf32>, vector<16xf32>
func.func @transpose_column_edge(%x: memref<32x20xf32>, %y: memref<20x32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j, i)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<32x20xf32>) outs(%y : memref<20x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// Attention's kᵀ: k a strided view of the qkv buffer [n, j, h, c], copied
// to [n, h, c, j]. The other dims (n, h) are outer loops; with `parallel`
// and 2^16 elements or more an scf.parallel.
// CHECK-LABEL: func.func @attention_kt
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for %{{.*}} step %c16
// CHECK: vector.load %{{.*}} : memref<4x50x8x64xf32, strided<[76800, 1536, 64, 1], offset: ?>>, vector<16xf32>
// CHECK: vector.maskedstore %{{.*}} : memref<4x8x64x50xf32>
// PAR-LABEL: func.func @attention_kt
// PAR: scf.parallel (%{{.*}}, %{{.*}}) = (%c0{{.*}}, %c0{{.*}}) to (%c4{{.*}}, %c8{{.*}})
// PAR: vector.shuffle
func.func @attention_kt(%k: memref<4x50x8x64xf32, strided<[76800, 1536, 64, 1], offset: ?>>, %kt: memref<4x8x64x50xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, j, h, c) -> (n, j, h, c)>, affine_map<(n, j, h, c) -> (n, h, c, j)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%k : memref<4x50x8x64xf32, strided<[76800, 1536, 64, 1], offset: ?>>) outs(%kt : memref<4x8x64x50xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// Left alone: a copy that keeps the innermost dim (no transpose), a
// transpose of f64, one that computes, and one whose output rows are not
// contiguous.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: vector.
// PAR-LABEL: func.func @left_alone
// PAR-NOT: scf.parallel
func.func @left_alone(%a: memref<16x16xf32>, %b: memref<16x16xf32>, %c: memref<16x16xf64>,
                      %d: memref<16x16xf64>, %e: memref<16x16xf32, strided<[1, 16]>>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<16x16xf32>) outs(%b : memref<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j, i)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<16x16xf64>) outs(%d : memref<16x16xf64>) {
  ^bb0(%x: f64, %o: f64):
    linalg.yield %x : f64
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j, i)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<16x16xf32>) outs(%b : memref<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %x : f32
    linalg.yield %y : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j, i)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<16x16xf32>) outs(%e : memref<16x16xf32, strided<[1, 16]>>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}
