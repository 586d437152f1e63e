// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-device-buffers | FileCheck %s --check-prefix=DEVICE
// RUN: vmoe-opt %s -split-input-file -vmoe-dealloc-at-exit | FileCheck %s --check-prefix=EXIT

// Host buffers become device memory (never host_shared); a buffer inside a
// kernel becomes the thread's private memory.
// DEVICE-LABEL: func.func @host_and_kernel_buffers
// DEVICE: %[[B:.*]] = gpu.alloc () : memref<16xf32>
// DEVICE: gpu.launch
// DEVICE:   memref.alloca() : memref<4xi32>
// DEVICE-NOT: memref.dealloc
// DEVICE-NOT: host_shared
// DEVICE: gpu.dealloc %[[B]] : memref<16xf32>
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

// -----

// Host copies become device copies; a constant a kernel reads gets a device
// copy, made once and freed before the return.
// DEVICE-LABEL: func.func @copies_and_constants
// DEVICE: %[[G:.*]] = memref.get_global @table : memref<4xf32>
// DEVICE: %[[C:.*]] = gpu.alloc () : memref<4xf32>
// DEVICE: gpu.memcpy %[[C]], %[[G]] : memref<4xf32>, memref<4xf32>
// DEVICE: gpu.memcpy %arg1, %arg0 : memref<8xf32>, memref<8xf32>
// DEVICE: gpu.launch
// DEVICE:   memref.load %[[C]]
// DEVICE: gpu.dealloc %[[C]] : memref<4xf32>
// DEVICE-NEXT: return
memref.global "private" constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
func.func @copies_and_constants(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t = memref.get_global @table : memref<4xf32>
  memref.copy %a, %b : memref<8xf32> to memref<8xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %t[%c0] : memref<4xf32>
    memref.store %v, %b[%c0] : memref<8xf32>
    gpu.terminator
  }
  return
}

// -----

// A scalar the host reads only for one kernel is read by the kernel; a copy
// into a contiguous subview is a device copy.
// DEVICE-LABEL: func.func @sink_scalar
// DEVICE: %[[V:.*]] = memref.subview
// DEVICE: gpu.memcpy %[[V]], %arg1 : memref<4xi32, strided<[1]>>, memref<4xi32>
// DEVICE: gpu.launch
// DEVICE-NEXT: %[[S:.*]] = memref.load %arg0[] : memref<i32>
// DEVICE-NEXT: memref.store %[[S]]
func.func @sink_scalar(%s: memref<i32>, %src: memref<4xi32>, %dst: memref<5xi32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %view = memref.subview %dst[0] [4] [1] : memref<5xi32> to memref<4xi32, strided<[1]>>
  memref.copy %src, %view : memref<4xi32> to memref<4xi32, strided<[1]>>
  %v = memref.load %s[] : memref<i32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %v, %dst[%c4] : memref<5xi32>
    gpu.terminator
  }
  return
}
