// RUN: vmoe-opt %s -convert-vmoe-to-gpu="mma=tf32" | FileCheck %s --check-prefix=TF32
// RUN: vmoe-opt %s -convert-vmoe-to-gpu="mma=bf16" | FileCheck %s --check-prefix=BF16
// RUN: not vmoe-opt %s -convert-vmoe-to-gpu="mma=fp8" 2>&1 | FileCheck %s --check-prefix=BAD

// fused_experts on tensor cores: two launches of 128 threads (4 warps) per
// 64 x 64 tile, grids y (row tiles) and z (experts x groups) capped at 65,535 with
// loops over the rest, padded
// shared tiles (A rows of 20 floats, B rows of 72 for TF32 and 68 for bf16),
// 32 loop-carried accumulators, two m16n8k8 TF32 or one m16n8k16 bf16
// mma.sync per 16 values of k and mma tile.
// TF32-LABEL: func.func @fused_experts
// TF32: %[[Y:.*]] = arith.minsi %{{.*}}, %c65535
// TF32: %[[Z:.*]] = arith.minsi %{{.*}}, %c65535
// TF32: gpu.launch blocks({{.*}}) in ({{.*}}, {{.*}} = %[[Y]], {{.*}} = %[[Z]]) threads({{.*}}) in ({{.*}} = %c128{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) workgroup(%{{.*}} : memref<64x20xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x72xf32, #gpu.address_space<workgroup>>)
// TF32:   scf.for
// TF32:     scf.for
// TF32:     scf.if
// TF32:       %{{.*}}:32 = scf.for {{.*}} iter_args(
// TF32:         gpu.barrier
// TF32:         arith.andi %{{.*}}, %c-8192_i32
// TF32:         nvvm.mma.sync A[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] B[%{{.*}}, %{{.*}}] C[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<tf32>, multiplicandBPtxType = #nvvm.mma_type<tf32>, shape = #nvvm.shape<m = 16, n = 8, k = 8>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// TF32:         gpu.barrier
// TF32: gpu.launch
// TF32:   nvvm.mma.sync
// TF32-NOT: math.fma
// BF16-LABEL: func.func @fused_experts
// BF16: workgroup(%{{.*}} : memref<64x20xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x68xf32, #gpu.address_space<workgroup>>)
// BF16:   arith.truncf %{{.*}} : f32 to bf16
// BF16:   nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// BF16-NOT: math.fma
// BAD: convert-vmoe-to-gpu: mma must be none, tf32 or bf16, got 'fp8'
func.func @fused_experts(%x: tensor<1x8x16xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x3xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x32x16xf32>, %b2: tensor<4x16xf32>) -> tensor<1x8x16xf32> {
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x3xi32>, tensor<4x1xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return %o : tensor<1x8x16xf32>
}
