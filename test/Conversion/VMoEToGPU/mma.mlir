// RUN: vmoe-opt %s -convert-vmoe-to-gpu="mma=tf32" | FileCheck %s --check-prefix=TF32
// RUN: vmoe-opt %s -convert-vmoe-to-gpu="mma=bf16" | FileCheck %s --check-prefix=BF16
// RUN: not vmoe-opt %s -convert-vmoe-to-gpu="mma=fp8" 2>&1 | FileCheck %s --check-prefix=BAD

// fused_experts on tensor cores: two launches of 128 threads (4 warps) per
// 64 x 64 tile, grids y (row tiles) and z (experts x groups) capped at
// 65,535 with loops over the rest; k tiles of 32 in a ring of 3 shared
// stages (no padding: XOR-swizzled chunks), filled by cp.async
// (nvgpu.device_async_copy) 16 bytes at a time when the operand starts
// 16-byte aligned (checked at run time), else 4 bytes at a time (a second
// version of the k loop); one wait_group and one barrier per k tile, all
// copies waited for after the loop (the last zero-fills); TF32
// A fragments by ldmatrix.x4, 32 loop-carried accumulators, four m16n8k8
// TF32 or two m16n8k16 bf16 mma.sync per k tile and mma tile; the
// epilogue goes through shared memory (64-bit fragment stores, 128-bit
// row reads).
// TF32-LABEL: func.func @fused_experts
// TF32: %[[Y:.*]] = arith.minsi %{{.*}}, %c65535
// TF32: %[[Z:.*]] = arith.minsi %{{.*}}, %c65535
// TF32: gpu.launch blocks({{.*}}) in ({{.*}}, {{.*}} = %[[Y]], {{.*}} = %[[Z]]) threads({{.*}}) in ({{.*}} = %c128{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) workgroup(%[[AS:.*]] : memref<3x64x32xf32, #gpu.address_space<workgroup>>, %[[BS:.*]] : memref<3x32x64xf32, #gpu.address_space<workgroup>>)
// TF32:   scf.for
// TF32:     scf.for
// TF32:       memref.extract_aligned_pointer_as_index
// TF32:       scf.if
// TF32:         %{{.*}}:32 = scf.if
// TF32:           nvgpu.device_async_copy %{{.*}}, %[[AS]][%c0{{.*}}], 4, %{{.*}} {bypassL1}
// TF32:           nvgpu.device_async_copy %{{.*}}, %[[BS]][%c0{{.*}}], 4, %{{.*}} {bypassL1}
// TF32:           nvgpu.device_async_create_group
// TF32:           nvgpu.device_async_create_group
// TF32:           %{{.*}}:32 = scf.for {{.*}} iter_args(
// TF32:             nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// TF32-NEXT:        gpu.barrier
// TF32:             nvgpu.device_async_create_group
// TF32:             nvgpu.ldmatrix %[[AS]]{{.*}} {numTiles = 4 : i32, transpose = false} : memref<3x64x32xf32, #gpu.address_space<workgroup>> -> vector<4x1xf32>
// TF32:             arith.andi %{{.*}}, %c-8192_i32
// TF32:             nvvm.mma.sync A[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] B[%{{.*}}, %{{.*}}] C[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<tf32>, multiplicandBPtxType = #nvvm.mma_type<tf32>, shape = #nvvm.shape<m = 16, n = 8, k = 8>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// TF32:           nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// TF32:         } else {
// TF32:           nvgpu.device_async_copy %{{.*}}, %[[AS]][%c0{{.*}}], 1, %{{.*}} :
// TF32:           scf.for
// TF32:         gpu.barrier
// TF32:         vector.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : memref<64x72xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// TF32:         gpu.barrier
// TF32:         vector.load %{{.*}} {alignment = 16 : i64} : memref<64x72xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// TF32:         gpu.barrier
// TF32: gpu.launch
// TF32:   nvvm.mma.sync
// TF32-NOT: math.fma
// BF16-LABEL: func.func @fused_experts
// BF16: workgroup(%{{.*}} : memref<3x64x32xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<3x32x64xf32, #gpu.address_space<workgroup>>)
// BF16:   vector.load %{{.*}} {alignment = 8 : i64} : memref<3x64x32xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// BF16:   arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// BF16:   nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// BF16-NOT: nvgpu.ldmatrix
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
