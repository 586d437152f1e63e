/*===- abi_main.c - Runs the compiled abi.mlir --------------------*- C -*-===*\
|*                                                                            *|
|* Part of the vmoe project, under the Apache License v2.0 with LLVM          *|
|* Exceptions.                                                                *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* The host side of abi.test: calls the compiled @abi and prints its three    *|
|* outputs (copied back from device memory) and where the       *|
|* registered memref's elements start and how many bytes they span. The      *|
|* memref to register is 3x4 f32 at offset 2 with strides [5, 1]: its        *|
|* elements span 2*5 + 3 + 1 = 14 floats (56 bytes) from element 2.          *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "vmoe/Runtime/CUDA/vmoe_cuda_runtime.h"

#include <stdint.h>
#include <stdio.h>

/// A ranked memref descriptor of rank 2 (the target of an unranked one).
typedef struct {
  float *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
} F32x2;

/// The compiled function; memrefs as descriptor fields, the unranked one as
/// rank and descriptor pointer.
void abi(float *inAllocated, float *inAligned, int64_t inOffset,
         int64_t inSize, int64_t inStride, float *outAllocated,
         float *outAligned, int64_t outOffset, int64_t outSize,
         int64_t outStride, int16_t *out16Allocated, int16_t *out16Aligned,
         int64_t out16Offset, int64_t out16Size, int64_t out16Stride,
         float *managedAllocated, float *managedAligned, int64_t managedOffset,
         int64_t managedSize, int64_t managedStride, int64_t rank,
         void *descriptor);

int main(void) {
  // Unbuffered, so that results and driver traces (stderr) interleave in
  // the order they happen.
  setvbuf(stdout, NULL, _IONBF, 0);
  char error[512];
  if (vmoe_cuda_available(error, sizeof(error))) {
    fprintf(stderr, "error: %s\n", error);
    return 1;
  }
  float in[16], out[16], managed[16], host[20];
  int16_t out16[16];
  for (int i = 0; i < 16; ++i) {
    in[i] = (float)i;
    out[i] = managed[i] = -1;
    out16[i] = -1;
  }
  F32x2 registered = {host, host, 2, {3, 4}, {5, 1}};
  fprintf(stderr, "register %p\n", (void *)(host + 2));
  fflush(stderr);

  abi(in, in, 0, 16, 1, out, out, 0, 16, 1, out16, out16, 0, 16, 1, managed,
      managed, 0, 16, 1, 2, &registered);
  if (vmoe_cuda_synchronize() || vmoe_cuda_last_error(error, sizeof(error))) {
    vmoe_cuda_last_error(error, sizeof(error));
    fprintf(stderr, "error: %s\n", error);
    return 1;
  }
  printf("out:");
  for (int i = 0; i < 16; ++i)
    printf(" %g", out[i]);
  printf("\nout16:");
  for (int i = 0; i < 16; ++i)
    printf(" %d", out16[i]);
  printf("\nmanaged:");
  for (int i = 0; i < 16; ++i)
    printf(" %g", managed[i]);
  printf("\n");
  return 0;
}
