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
// WIDE-LABEL: func.func @fused_experts_panels
// WIDE-NOT: memref<?x?x?x48xf32>
// WIDE: vector.load %{{.*}} : memref<4x4x32x16xf32, {{.*}}>, vector<16xf32>
// WIDE-NOT: memref<?x?x?x48xf32>
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

// Elsewhere unpack_panels is a copy: result[k, n] = panels[n floordiv 16, k, n mod 16].
// CHECK: #[[$IN:.*]] = affine_map<(d0, d1) -> (d1 floordiv 16, d0, d1 mod 16)>
// CHECK-LABEL: func.func @unpack_panels_copy
// CHECK: linalg.generic {indexing_maps = [#[[$IN]], #{{.*}}]
// CHECK-NOT: vmoe.unpack_panels
func.func @unpack_panels_copy(%p: tensor<3x8x16xf32>) -> tensor<8x40xf32> {
  %w = vmoe.unpack_panels %p : tensor<3x8x16xf32> -> tensor<8x40xf32>
  return %w : tensor<8x40xf32>
}
