// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf | FileCheck %s
// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf="vector-width=16 tile-rows=8 tile-vectors=3" \
// RUN:   | FileCheck %s --check-prefix=WIDE
// RUN: not vmoe-opt %s -split-input-file -convert-vmoe-to-scf="vector-width=32" \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD

// Expert weights in panel layout are read in place: no packing scratch
// ([blocks, panels, kc, NR]) and no packing copy; every B vector of the
// microkernel is a load from the panels at [e, n / 16, k, n % 16].

// CHECK-LABEL: func.func @fused_experts_panels
// CHECK-NOT: memref.alloc({{.*}}) {{.*}} : memref<?x?x?x16xf32>
// CHECK: vector.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<4x4x32x16xf32, {{.*}}>, vector<8xf32>
// CHECK: vector.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<4x2x64x16xf32, {{.*}}>, vector<8xf32>
// CHECK-NOT: memref.alloc({{.*}}) {{.*}} : memref<?x?x?x16xf32>
// Each GEMM takes the tile that pads fewest of its columns
// (tileForColumns): H = 64 runs as 6 x 4 (one 64-wide panel, not 96
// columns), D = 32 keeps 8 x 3.
// WIDE-LABEL: func.func @fused_experts_panels
// WIDE-NOT: memref<?x?x?x48xf32>
// WIDE: scf.for %{{.*}} = %{{.*}} to %c64 step %c256
// WIDE: scf.for {{.*}} step %c6
// WIDE: vector.load %{{.*}} : memref<4x4x32x16xf32, {{.*}}>, vector<16xf32>
// WIDE-NOT: memref<?x?x?x48xf32>
// WIDE: scf.for %{{.*}} = %{{.*}} to %c32 step %c240
// WIDE: scf.for {{.*}} step %c8
// BAD: error: 'vmoe.fused_experts' op weight_panels (16) must be a multiple of the vector width (32) to be lowered
func.func @fused_experts_panels(%x: tensor<1x16x32xf32>, %s: tensor<1x16x2xi32>, %w: tensor<1x16x2xf32>,
    %e: tensor<4x1x8xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x4x32x16xf32>, %b1: tensor<4x64xf32>,
    %w2: tensor<4x2x64x16xf32>, %b2: tensor<4x32xf32>) -> tensor<1x16x32xf32> {
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2 {weight_panels = 16 : i64}
      : tensor<1x16x32xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>, tensor<4x1x8xi32>, tensor<4x1xi32>,
        tensor<4x4x32x16xf32>, tensor<4x64xf32>, tensor<4x2x64x16xf32>, tensor<4x32xf32>
  return %o : tensor<1x16x32xf32>
}

// -----

// 64-wide expert panels (f32 token choice kernels of D and He multiples of
// 64) with He = 576: the second GEMM runs over two blocks of k (512 + 64).
// Its loops over panels and k blocks form one nest whose levels swap at
// run time: panels outside when the expert has at most one row tile of
// rows (6 with 8 lanes), so that the tile reads the weights in storage
// order; k blocks outside otherwise. The first GEMM (K = 64, one block)
// keeps the plain nest. With 16 lanes both GEMMs take the 6 x 4 tile, as
// wide as the panels (the pass's 8 x 3 would straddle two of them).
// CHECK-LABEL: func.func @fused_experts_wide_panels
// CHECK: scf.for %{{.*}} = %{{.*}} to %c576 step
// CHECK-NOT: arith.cmpi sle
// CHECK: vector.load %{{.*}} : memref<4x9x64x64xf32, {{.*}}>, vector<8xf32>
// CHECK: %[[PANELS:.*]] = arith.ceildivsi %{{.*}}, %c16{{.*}} : index
// CHECK: %[[ONE:.*]] = arith.cmpi sle, %{{.*}}, %c6{{.*}} : index
// CHECK: %[[BLOCKS:.*]] = arith.ceildivsi %c576, %c512{{.*}} : index
// CHECK: %[[OUTER:.*]] = arith.select %[[ONE]], %[[PANELS]], %[[BLOCKS]] : index
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[OUTER]]
// CHECK: %[[INNER:.*]] = arith.select %[[ONE]], %[[BLOCKS]], %[[PANELS]] : index
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %[[INNER]]
// CHECK: %[[P:.*]] = arith.select %[[ONE]], %[[I]], %[[J]] : index
// CHECK: %[[B:.*]] = arith.select %[[ONE]], %[[J]], %[[I]] : index
// CHECK: arith.muli %[[B]], %c512{{.*}} : index
// CHECK: arith.muli %[[P]], %c16{{.*}} : index
// CHECK: vector.load %{{.*}} : memref<4x1x576x64xf32, {{.*}}>, vector<8xf32>
// WIDE-LABEL: func.func @fused_experts_wide_panels
// WIDE: scf.for %{{.*}} = %{{.*}} to %c576 step %c256
// WIDE: scf.for {{.*}} step %c6
// WIDE: vector.load %{{.*}} : memref<4x9x64x64xf32, {{.*}}>, vector<16xf32>
// WIDE: arith.cmpi sle, %{{.*}}, %c6{{.*}} : index
// WIDE: vector.load %{{.*}} : memref<4x1x576x64xf32, {{.*}}>, vector<16xf32>
func.func @fused_experts_wide_panels(%x: tensor<1x16x64xf32>, %s: tensor<1x16x2xi32>, %w: tensor<1x16x2xf32>,
    %e: tensor<4x1x8xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x9x64x64xf32>, %b1: tensor<4x576xf32>,
    %w2: tensor<4x1x576x64xf32>, %b2: tensor<4x64xf32>) -> tensor<1x16x64xf32> {
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2 {weight_panels = 64 : i64}
      : tensor<1x16x64xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>, tensor<4x1x8xi32>, tensor<4x1xi32>,
        tensor<4x9x64x64xf32>, tensor<4x576xf32>, tensor<4x1x576x64xf32>, tensor<4x64xf32>
  return %o : tensor<1x16x64xf32>
}

// -----

// Elsewhere unpack_panels is a copy: result[k, n] = panels[n floordiv 16, k, n mod 16].
// CHECK: #[[$IN:.*]] = affine_map<(d0, d1) -> (d1 floordiv 16, d0, d1 mod 16)>
// CHECK-LABEL: func.func @unpack_panels_copy
// CHECK: linalg.generic {indexing_maps = [#[[$IN]], #{{.*}}]
// CHECK-NOT: vmoe.unpack_panels
func.func @unpack_panels_copy(%p: tensor<3x8x16xf32>) -> tensor<8x40xf32> {
  %w = vmoe.unpack_panels %p : tensor<3x8x16xf32> -> tensor<8x40xf32>
  return %w : tensor<8x40xf32>
}

// -----

// A dense layer's kernel in panel layout (constant weights packed once):
// the contraction reading it as B (k, n) reads the panels in place through
// (n floordiv 16, k, n mod 16); no unpack, no copy left.
// CHECK-DAG: #[[$A:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$P:.*]] = affine_map<(d0, d1, d2) -> (d2 floordiv 16, d1, d2 mod 16)>
// CHECK-LABEL: func.func @dense_kernel_panels
// CHECK-SAME: %[[X:.*]]: tensor<8x32xf32>, %[[PANELS:.*]]: tensor<3x32x16xf32>
// CHECK-NOT: vmoe.unpack_panels
// CHECK: linalg.generic {indexing_maps = [#[[$A]], #[[$P]], #{{.*}}]
// CHECK-SAME: ins(%[[X]], %[[PANELS]] : tensor<8x32xf32>, tensor<3x32x16xf32>)
// CHECK-NOT: linalg.generic
// WIDE-LABEL: func.func @dense_kernel_panels
// WIDE: ins(%{{.*}}, %{{.*}} : tensor<8x32xf32>, tensor<3x32x16xf32>)
#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @dense_kernel_panels(%x: tensor<8x32xf32>, %p: tensor<3x32x16xf32>,
                               %init: tensor<8x48xf32>) -> tensor<8x48xf32> {
  %w = vmoe.unpack_panels %p : tensor<3x32x16xf32> -> tensor<32x48xf32>
  %y = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %w : tensor<8x32xf32>, tensor<32x48xf32>) outs(%init : tensor<8x48xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x48xf32>
  return %y : tensor<8x48xf32>
}

// -----

// A dense MLP (single-expert expert_ffn) with both kernels in panels: the
// two expert matmuls the lowering builds read them in place, with the
// expert dim leading: (e, n floordiv 16, k, n mod 16).
// CHECK: #[[$P:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4 floordiv 16, d3, d4 mod 16)>
// CHECK-LABEL: func.func @dense_mlp_panels
// CHECK-NOT: vmoe.unpack_panels
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[$P]], #{{.*}}]{{.*}}ins(%{{.*}}, %{{.*}} : tensor<1x1x8x32xf32>, tensor<1x3x32x16xf32>)
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[$P]], #{{.*}}]{{.*}}ins(%{{.*}}, %{{.*}} : tensor<1x1x8x48xf32>, tensor<1x2x48x16xf32>)
func.func @dense_mlp_panels(%x: tensor<1x1x8x32xf32>, %p1: tensor<1x3x32x16xf32>, %b1: tensor<1x48xf32>,
                            %p2: tensor<1x2x48x16xf32>, %b2: tensor<1x32xf32>) -> tensor<1x1x8x32xf32> {
  %w1 = vmoe.unpack_panels %p1 : tensor<1x3x32x16xf32> -> tensor<1x32x48xf32>
  %w2 = vmoe.unpack_panels %p2 : tensor<1x2x48x16xf32> -> tensor<1x48x32xf32>
  %y = vmoe.expert_ffn %x, %w1, %b1, %w2, %b2
      : tensor<1x1x8x32xf32>, tensor<1x32x48xf32>, tensor<1x48xf32>, tensor<1x48x32xf32>, tensor<1x32xf32>
  return %y : tensor<1x1x8x32xf32>
}

// -----

// What the fold leaves alone: unpacked weights read as the A operand (rows,
// not the output's columns), by a non-contraction, or in panels whose width
// the vector lanes do not divide (8 < 16 lanes, WIDE) keep the copy to the
// plain layout; a plain B keeps its plain map.
// CHECK-LABEL: func.func @panels_left_alone
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}} : tensor<2x32x16xf32>)
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<32x32xf32>, tensor<32x8xf32>)
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}} : tensor<32x32xf32>)
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<4x48xf32>, tensor<6x48x8xf32>)
// WIDE-LABEL: func.func @panels_left_alone
// WIDE: ins(%{{.*}} : tensor<6x48x8xf32>)
// WIDE: ins(%{{.*}}, %{{.*}} : tensor<4x48xf32>, tensor<48x48xf32>)
#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
func.func @panels_left_alone(%p: tensor<2x32x16xf32>, %b: tensor<32x8xf32>, %i1: tensor<32x8xf32>,
                             %i2: tensor<32x32xf32>, %x: tensor<4x48xf32>, %q: tensor<6x48x8xf32>,
                             %i3: tensor<4x48xf32>)
    -> (tensor<32x8xf32>, tensor<32x32xf32>, tensor<4x48xf32>) {
  // As A: [32 x 32] . [32 x 8].
  %w = vmoe.unpack_panels %p : tensor<2x32x16xf32> -> tensor<32x32xf32>
  %y = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%w, %b : tensor<32x32xf32>, tensor<32x8xf32>) outs(%i1 : tensor<32x8xf32>) {
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %m = arith.mulf %a, %c : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<32x8xf32>
  // Elementwise.
  %z = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<32x32xf32>) outs(%i2 : tensor<32x32xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<32x32xf32>
  // Panels of 8: folded with 8 lanes, a copy with 16.
  %v = vmoe.unpack_panels %q : tensor<6x48x8xf32> -> tensor<48x48xf32>
  %u = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %v : tensor<4x48xf32>, tensor<48x48xf32>) outs(%i3 : tensor<4x48xf32>) {
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %m = arith.mulf %a, %c : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x48xf32>
  return %y, %z, %u : tensor<32x8xf32>, tensor<32x32xf32>, tensor<4x48xf32>
}
