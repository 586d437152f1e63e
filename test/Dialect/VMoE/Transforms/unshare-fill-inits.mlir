// RUN: vmoe-opt %s -split-input-file -vmoe-unshare-fill-inits | FileCheck %s

#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>

// One zero fill (as CSE leaves it) is the destination of two GEMMs: each
// gets an empty tensor and a fill of its own right before it, and the
// shared one goes.
// CHECK-LABEL: func.func @shared_by_two_gemms
// CHECK-NEXT: arith.constant
// CHECK-NEXT: %[[E1:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT: %[[F1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E1]] : tensor<4x8xf32>)
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[F1]] : tensor<4x8xf32>)
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT: %[[F2:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E2]] : tensor<4x8xf32>)
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[F2]] : tensor<4x8xf32>)
// CHECK-NOT: linalg.fill
func.func @shared_by_two_gemms(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>,
                               %c: tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<4x8xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : tensor<4x16xf32>, tensor<16x8xf32>) outs(%fill : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %1 = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %c : tensor<4x16xf32>, tensor<16x8xf32>) outs(%fill : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A fill also read as an input keeps the original for that read; the
// destination gets its own.
// CHECK-LABEL: func.func @also_an_input
// CHECK: %[[F0:.*]] = linalg.fill
// CHECK: %[[F1:.*]] = linalg.fill
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[F0]] : tensor<8xf32>) outs(%[[F1]] : tensor<8xf32>)
func.func @also_an_input() -> tensor<8xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<8xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<8xf32>) -> tensor<8xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%fill : tensor<8xf32>) outs(%fill : tensor<8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Left alone: a fill of a function argument (not a tensor.empty), and a
// fill returned rather than used as a destination.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-2: linalg.fill
// CHECK-NOT: linalg.fill
// CHECK-NOT: tensor.empty
func.func @left_alone(%t: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%t : tensor<8xf32>) -> tensor<8xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      outs(%f : tensor<8xf32>) {
  ^bb0(%acc: f32):
    linalg.yield %acc : f32
  } -> tensor<8xf32>
  %empty = tensor.empty() : tensor<8xf32>
  %g = linalg.fill ins(%zero : f32) outs(%empty : tensor<8xf32>) -> tensor<8xf32>
  return %0, %f, %g : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
