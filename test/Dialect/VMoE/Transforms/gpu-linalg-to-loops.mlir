// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-linalg-to-loops | FileCheck %s

// A top-level linalg op becomes a kernel-shaped scf.parallel (reductions
// inside); a linalg op inside a parallel loop runs in its thread as plain
// loops; scf.forall becomes scf.parallel.
// CHECK-LABEL: func.func @top_level_and_nested
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) = {{.*}} to (%c4{{.*}}, %c4{{.*}})
// CHECK:   scf.for
// CHECK-NOT: scf.forall
// CHECK: scf.parallel (%{{.*}}) = {{.*}} to (%c4{{.*}})
// CHECK:   scf.for
// CHECK-NOT: linalg
func.func @top_level_and_nested(%a: memref<4x8xf32>, %b: memref<8x4xf32>, %c: memref<4x4xf32>, %rows: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<4x8xf32>, memref<8x4xf32>) outs(%c : memref<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  scf.forall (%i) in (4) {
    %row = memref.subview %rows[%i, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%row : memref<8xf32, strided<[1], offset: ?>>)
  }
  return
}
