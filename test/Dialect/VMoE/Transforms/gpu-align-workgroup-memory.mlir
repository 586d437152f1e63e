// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-align-workgroup-memory | FileCheck %s
// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-align-workgroup-memory -convert-gpu-to-nvvm 2>&1 | FileCheck %s --check-prefix=NVVM
// RUN: not vmoe-opt %s -split-input-file -vmoe-gpu-align-workgroup-memory=alignment=12 2>&1 | FileCheck %s --check-prefix=BAD

// Workgroup attributions get llvm.align = 16 (a larger one is kept);
// private attributions are left alone; convert-gpu-to-nvvm makes the
// .shared globals 16-byte aligned.
// CHECK-LABEL: gpu.func @gemm
// CHECK-SAME: workgroup(%{{.*}} : memref<64x32xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<8xf32, #gpu.address_space<workgroup>> {llvm.align = 64 : i64})
// CHECK-SAME: private(%{{.*}} : memref<4xf32, #gpu.address_space<private>>)
// NVVM: llvm.mlir.global internal @__wg_gemm_0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<2048 x f32>
// NVVM: llvm.mlir.global internal @__wg_gemm_1() {addr_space = 3 : i32, alignment = 64 : i64} : !llvm.array<8 x f32>
// BAD: vmoe-gpu-align-workgroup-memory: alignment must be a power of two in [1, 4096], got 12
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @gemm(%out: memref<4xf32>)
        workgroup(%a : memref<64x32xf32, #gpu.address_space<workgroup>>,
                  %b : memref<8xf32, #gpu.address_space<workgroup>> {llvm.align = 64 : i64})
        private(%p : memref<4xf32, #gpu.address_space<private>>) kernel {
      %c0 = arith.constant 0 : index
      %v = memref.load %a[%c0, %c0] : memref<64x32xf32, #gpu.address_space<workgroup>>
      %w = memref.load %b[%c0] : memref<8xf32, #gpu.address_space<workgroup>>
      %s = arith.addf %v, %w : f32
      memref.store %s, %out[%c0] : memref<4xf32>
      gpu.return
    }
  }
}

// -----

// A module without kernels is left as it is.
// CHECK-LABEL: func.func @host
// CHECK-NEXT: return
func.func @host() {
  return
}
