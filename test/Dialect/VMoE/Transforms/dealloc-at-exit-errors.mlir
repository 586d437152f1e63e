// RUN: vmoe-opt %s -vmoe-dealloc-at-exit -verify-diagnostics

func.func @negative_escaping_buffer() -> memref<16xf32> {
  // expected-error @+1 {{escapes its function; cannot free it at exit}}
  %buffer = memref.alloc() : memref<16xf32>
  return %buffer : memref<16xf32>
}
