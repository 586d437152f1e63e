// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-emulate-kernels -verify-diagnostics | FileCheck %s

// A kernel with a special register, a barrier, shared memory and a libdevice
// call: the body moves to the host under a prefixed name with host pointers,
// an entry loads each argument from the argument array, a constructor
// registers the entry and the shared variable, and the gpu.module becomes a
// gpu.binary naming the registration. The host launch is unchanged. The
// shared variable (.align 16) sits 16 bytes into a byte array aligned to 32,
// so it is 16-byte aligned and no more, as declared.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK-NOT: gpu.module
// CHECK-DAG: llvm.func @__nv_expf(f32) -> f32
// CHECK-DAG: llvm.mlir.global internal @__vmoe_emu_kernels___wg_k_0_storage() {addr_space = 0 : i32, alignment = 32 : i64} : !llvm.array<144 x i8>
// CHECK: llvm.func internal @__vmoe_emu_kernels_k(%{{.*}}: !llvm.ptr, %{{.*}}: f32)
// CHECK-NOT: nvvm.
// CHECK:   llvm.call @__vmoe_emu_sreg(%{{.*}}) : (i32) -> i32
// CHECK:   %[[STORAGE:.*]] = llvm.mlir.addressof @__vmoe_emu_kernels___wg_k_0_storage : !llvm.ptr
// CHECK:   llvm.getelementptr %[[STORAGE]][16] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK:   llvm.call @__vmoe_emu_barrier() : () -> ()
// CHECK:   llvm.call @__nv_expf
// CHECK: llvm.func internal @__vmoe_emu_kernels_k_entry(%[[PARAMS:.*]]: !llvm.ptr)
// CHECK:   %[[P0:.*]] = llvm.getelementptr %[[PARAMS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK:   %[[A0:.*]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
// CHECK:   llvm.load %[[A0]] : !llvm.ptr -> !llvm.ptr
// CHECK:   %[[P1:.*]] = llvm.getelementptr %[[PARAMS]][1]
// CHECK:   llvm.call @__vmoe_emu_kernels_k(
// CHECK: gpu.binary @kernels  [#gpu.object<#nvvm.target, "vmoe-emu:kernels:{{[0-9A-F]+}}\00">]
// CHECK: gpu.launch_func  @kernels::@k
// CHECK: llvm.func internal @__vmoe_emu_register_kernels()
// CHECK:   llvm.call @__vmoe_emu_register_kernel(
// CHECK:   llvm.call @__vmoe_emu_register_shared(%{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, i64) -> ()
// CHECK: llvm.mlir.global_ctors ctors = [@__vmoe_emu_register_kernels], priorities = [101 : i32]
module attributes {gpu.container_module} {
  gpu.module @kernels {
    llvm.mlir.global internal @__wg_k_0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<32 x f32>
    llvm.func @__nv_expf(f32) -> f32
    llvm.func @k(%out: !llvm.ptr<1>, %x: f32) attributes {gpu.kernel, nvvm.kernel} {
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %shared = llvm.mlir.addressof @__wg_k_0 : !llvm.ptr<3>
      %generic = llvm.addrspacecast %shared : !llvm.ptr<3> to !llvm.ptr
      %slot = llvm.getelementptr %generic[%tid] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      llvm.store %x, %slot : f32, !llvm.ptr
      nvvm.barrier0
      %v = llvm.load %slot : !llvm.ptr -> f32
      %e = llvm.call @__nv_expf(%v) : (f32) -> f32
      llvm.store %e, %out : f32, !llvm.ptr<1>
      llvm.return
    }
  }
  func.func @host(%out: !llvm.ptr<1>, %x: f32) {
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1)
        args(%out : !llvm.ptr<1>, %x : f32)
    return
  }
}

// -----

// Warp-level instructions become calls with their operands in arrays.
// CHECK-LABEL: llvm.func internal @__vmoe_emu_warp_k
// CHECK: llvm.alloca {{.*}} x i32
// CHECK: llvm.call @__vmoe_emu_mma({{.*}}) : (i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK: llvm.call @__vmoe_emu_ldmatrix({{.*}}) : (i32, i32, !llvm.ptr, !llvm.ptr) -> ()
// CHECK: llvm.call @__vmoe_emu_cp_async({{.*}}) : (!llvm.ptr, !llvm.ptr, i32, i32) -> ()
// CHECK: llvm.call @__vmoe_emu_cp_async_commit()
// CHECK: llvm.call @__vmoe_emu_cp_async_wait(%{{.*}}) : (i32) -> ()
// CHECK: llvm.call @__vmoe_emu_shfl({{.*}}) : (i32, i32, i32, i32, i32, !llvm.ptr) -> i32
// CHECK: llvm.call @__vmoe_emu_vote({{.*}}) : (i32, i32, i32) -> i32
module attributes {gpu.container_module} {
  gpu.module @warp {
    llvm.func @k(%p: !llvm.ptr<3>, %g: !llvm.ptr<1>, %a: i32, %f: f32, %b: i1) attributes {gpu.kernel, nvvm.kernel} {
      %d = nvvm.mma.sync A[%a, %a, %a, %a] B[%a, %a] C[%f, %f, %f, %f]
          {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>,
           multiplicandAPtxType = #nvvm.mma_type<tf32>,
           multiplicandBPtxType = #nvvm.mma_type<tf32>,
           shape = #nvvm.shape<m = 16, n = 8, k = 8>}
          : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
      %l = nvvm.ldmatrix %p {num = 4 : i32, layout = #nvvm.mma_layout<row>, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>, eltType = #nvvm.ld_st_matrix_elt_type<b16>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
      nvvm.cp.async.shared.global %p, %g, 16, cache = cg : !llvm.ptr<3>, !llvm.ptr<1>
      nvvm.cp.async.commit.group
      nvvm.cp.async.wait.group 0
      %m = llvm.mlir.constant(-1 : i32) : i32
      %c = llvm.mlir.constant(31 : i32) : i32
      %s = nvvm.shfl.sync bfly %m, %f, %a, %c : f32 -> f32
      %v = nvvm.vote.sync ballot %m, %b -> i32
      llvm.return
    }
  }
}

// -----

// Without an emulation: one error naming the op.
module attributes {gpu.container_module} {
  gpu.module @tensor_memory {
    llvm.func @k() attributes {gpu.kernel, nvvm.kernel} {
      // expected-error @below {{'nvvm.wgmma.fence.aligned' op has no emulation in vmoe-gpu-emulate-kernels}}
      nvvm.wgmma.fence.aligned
      llvm.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @ptx {
    llvm.func @k() attributes {gpu.kernel, nvvm.kernel} {
      // expected-error @below {{(inline PTX) has no emulation}}
      llvm.inline_asm has_side_effects "membar.gl;", "" : () -> ()
      llvm.return
    }
  }
}
