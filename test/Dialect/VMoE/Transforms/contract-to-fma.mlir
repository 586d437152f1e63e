// RUN: vmoe-opt %s -split-input-file -vmoe-contract-to-fma | FileCheck %s

// The body of a contraction accumulates with one rounding per step.
// CHECK-LABEL: func.func @contraction_body
// CHECK: linalg.generic
// CHECK:   %[[F:.*]] = math.fma %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK:   linalg.yield %[[F]]
func.func @contraction_body(%a: memref<4x8xf32>, %b: memref<8x4xf32>, %c: memref<4x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<4x8xf32>, memref<8x4xf32>) outs(%c : memref<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

/// A product used twice, and f64, stay.
// CHECK-LABEL: func.func @negative_shared_product
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: arith.addf
// CHECK-NOT: math.fma
func.func @negative_shared_product(%a: f32, %b: f32, %c: f32, %x: f64, %y: f64) -> (f32, f32, f64) {
  %p = arith.mulf %a, %b : f32
  %s = arith.addf %c, %p : f32
  %t = arith.addf %p, %s : f32
  %q = arith.mulf %x, %y : f64
  %r = arith.addf %q, %x : f64
  return %s, %t, %r : f32, f32, f64
}
