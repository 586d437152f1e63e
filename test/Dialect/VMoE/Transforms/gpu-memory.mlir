// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-host-shared-allocs | FileCheck %s --check-prefix=SHARED
// RUN: vmoe-opt %s -split-input-file -vmoe-dealloc-at-exit | FileCheck %s --check-prefix=EXIT

// Host buffers become managed memory; a buffer inside a kernel becomes the
// thread's private memory. The deallocation is synchronous (waits around
// the asynchronous form that gpu-to-llvm lowers).
// SHARED-LABEL: func.func @host_and_kernel_buffers
// SHARED: %[[B:.*]] = gpu.alloc  host_shared () : memref<16xf32>
// SHARED: gpu.launch
// SHARED:   memref.alloca() : memref<4xi32>
// SHARED-NOT: memref.dealloc
// SHARED: %[[T:.*]] = gpu.wait async
// SHARED: %[[D:.*]] = gpu.dealloc async [%[[T]]] %[[B]] : memref<16xf32>
// SHARED: gpu.wait [%[[D]]]
/// Already freed: no second dealloc at exit.
// EXIT-LABEL: func.func @host_and_kernel_buffers
// EXIT: %[[B:.*]] = memref.alloc() : memref<16xf32>
// EXIT: memref.dealloc %[[B]] :
// EXIT-NOT: memref.dealloc %[[B]] :
// EXIT: return
func.func @host_and_kernel_buffers() {
  %c1 = arith.constant 1 : index
  %buffer = memref.alloc() : memref<16xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %scratch = memref.alloc() : memref<4xi32>
    memref.dealloc %scratch : memref<4xi32>
    gpu.terminator
  }
  memref.dealloc %buffer : memref<16xf32>
  return
}

// -----

// The top-level buffers of a function are freed before each return; nested
// ones (per-thread scratch) are not.
// EXIT-LABEL: func.func @free_at_exit
// EXIT: %[[A:.*]] = memref.alloc() : memref<16xf32>
// EXIT: scf.if
// EXIT:   memref.alloc() : memref<4xf32>
// EXIT-NOT: memref.dealloc
// EXIT: memref.dealloc %[[A]] :
// EXIT-NEXT: return
func.func @free_at_exit(%c: i1) {
  %a = memref.alloc() : memref<16xf32>
  scf.if %c {
    %b = memref.alloc() : memref<4xf32>
  }
  return
}
