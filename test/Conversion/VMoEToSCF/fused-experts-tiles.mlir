// RUN: vmoe-opt %s -convert-vmoe-to-scf | FileCheck %s --check-prefix=NARROW
// RUN: vmoe-opt %s -convert-vmoe-to-scf="vector-width=16 tile-rows=8 tile-vectors=3" \
// RUN:   | FileCheck %s --check-prefix=WIDE
// RUN: not vmoe-opt %s -convert-vmoe-to-scf="tile-rows=0" 2>&1 | FileCheck %s --check-prefix=BAD

// The register tile of the fused expert kernels: by default 6 rows x 2
// vectors of 8 lanes (12 accumulators, one FMA per accumulator and k), with
// AVX-512 8 x 3 vectors of 16 lanes (24 accumulators); two GEMMs per op.
// The rows after the full tiles take one exact tile of 1 .. rows-1 rows
// (scf.index_switch): 12 + 2 * (1 + .. + 5) = 42 FMAs per GEMM narrow,
// 24 + 3 * (1 + .. + 7) = 108 wide.

// NARROW-LABEL: func.func @tiles
// NARROW-COUNT-12: vector.fma {{.*}} : vector<8xf32>
// NARROW: scf.index_switch
// NARROW-COUNT-30: vector.fma {{.*}} : vector<8xf32>
// NARROW-COUNT-42: vector.fma {{.*}} : vector<8xf32>
// NARROW-NOT: vector.fma
// NARROW-NOT: vector<16xf32>
// WIDE-LABEL: func.func @tiles
// WIDE-COUNT-24: vector.fma {{.*}} : vector<16xf32>
// WIDE: scf.index_switch
// WIDE-COUNT-84: vector.fma {{.*}} : vector<16xf32>
// WIDE-COUNT-108: vector.fma {{.*}} : vector<16xf32>
// WIDE-NOT: vector.fma
// WIDE-NOT: vector<8xf32>
// BAD: error: convert-vmoe-to-scf: tile-rows must be in [1, 16], got 0
func.func @tiles(%x: tensor<1x64x64xf32>, %s: tensor<1x64x2xi32>, %w: tensor<1x64x2xf32>,
    %e: tensor<4x1x40xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x64x128xf32>, %b1: tensor<4x128xf32>,
    %w2: tensor<4x128x64xf32>, %b2: tensor<4x64xf32>) -> tensor<1x64x64xf32> {
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      : tensor<1x64x64xf32>, tensor<1x64x2xi32>, tensor<1x64x2xf32>, tensor<4x1x40xi32>, tensor<4x1xi32>,
        tensor<4x64x128xf32>, tensor<4x128xf32>, tensor<4x128x64xf32>, tensor<4x64xf32>
  return %o : tensor<1x64x64xf32>
}
