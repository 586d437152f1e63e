// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-device-buffers -verify-diagnostics

// Host code may not touch device memory itself.
func.func @host_load(%a: memref<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'memref.load' op in host code would access device memory}}
  %v = memref.load %a[%c0] : memref<8xf32>
  return %v : f32
}

// -----

func.func @strided_copy(%a: memref<8xf32, strided<[2]>>, %b: memref<8xf32>) {
  // expected-error @+1 {{'memref.copy' op in host code must copy between contiguous buffers on the GPU path}}
  memref.copy %a, %b : memref<8xf32, strided<[2]>> to memref<8xf32>
  return
}

// -----

// Not sunk: a kernel in between writes the memref.
func.func @load_then_write(%s: memref<i32>, %out: memref<1xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0 : i32
  // expected-error @+1 {{'memref.load' op in host code would access device memory}}
  %v = memref.load %s[] : memref<i32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %z, %s[] : memref<i32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %v, %out[%c0] : memref<1xi32>
    gpu.terminator
  }
  return
}
