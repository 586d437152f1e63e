// RUN: vmoe-opt %s --split-input-file --vmoe-parallel-linalg | FileCheck %s
// RUN: vmoe-opt %s --split-input-file --vmoe-parallel-linalg="min-work=1000000" \
// RUN:   | FileCheck %s --check-prefix=LARGE

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// A residual add of 400 x 512 runs over 16 chunks of 25 rows: an
// scf.parallel around the same generic on subviews.
// CHECK-LABEL: func.func @residual
// CHECK-DAG: %[[C400:.*]] = arith.constant 400 : index
// CHECK-DAG: %[[C25:.*]] = arith.constant 25 : index
// CHECK: scf.parallel (%[[I:.*]]) = (%{{.*}}) to (%[[C400]]) step (%{{.*}})
// CHECK:   memref.subview %{{.*}}[%[[I]], 0] [25, 512] [1, 1]
// CHECK:   linalg.generic
// CHECK:     arith.addf
// LARGE-LABEL: func.func @residual
// LARGE-NOT: scf.parallel
func.func @residual(%x: memref<400x512xf32>, %y: memref<400x512xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<400x512xf32>) outs(%y : memref<400x512xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// A row sum (layer norm statistics) splits its rows, never the reduced dim.
// CHECK-LABEL: func.func @row_sums
// CHECK: scf.parallel
// CHECK:   linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
func.func @row_sums(%x: memref<400x512xf32>, %s: memref<400xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<400x512xf32>) outs(%s : memref<400xf32>) {
  ^bb0(%a: f32, %b: f32):
    %t = arith.addf %a, %b : f32
    linalg.yield %t : f32
  }
  return
}

// -----

#id3 = affine_map<(u, i, j) -> (u, i, j)>

// A leading unit dim: the rows after it are split.
// CHECK-LABEL: func.func @unit_lead
// CHECK: scf.parallel
// CHECK:   memref.subview %{{.*}}[0, %{{.*}}, 0] [1, 25, 512]
func.func @unit_lead(%x: memref<1x400x512xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#id3], iterator_types = ["parallel", "parallel", "parallel"]}
      outs(%x : memref<1x400x512xf32>) {
  ^bb0(%b: f32):
    %m = arith.maximumf %b, %zero : f32
    linalg.yield %m : f32
  }
  return
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>

// Left alone: a reduction over the first dim (column sums), a small op,
// an op already inside a parallel loop, and tensors.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: scf.parallel
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["reduction", "parallel"]
// CHECK-NOT: scf.parallel
// CHECK: linalg.fill
// CHECK: scf.forall
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @left_alone(%x: memref<400x512xf32>, %c: memref<512xf32>,
                      %small: memref<8x50xf32>, %t: tensor<400x512xf32>)
    -> tensor<400x512xf32> {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<400x512xf32>) outs(%c : memref<512xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%zero : f32) outs(%small : memref<8x50xf32>)
  scf.forall (%i) in (4) {
    linalg.fill ins(%zero : f32) outs(%x : memref<400x512xf32>)
  }
  %r = linalg.fill ins(%zero : f32) outs(%t : tensor<400x512xf32>) -> tensor<400x512xf32>
  return %r : tensor<400x512xf32>
}
