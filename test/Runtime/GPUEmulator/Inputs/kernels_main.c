/*===- kernels_main.c - Runs Inputs/kernels.mlir in the emulator --*- C -*-===*\
|*                                                                            *|
|* Part of the vmoe project, under the Apache License v2.0 with LLVM          *|
|* Exceptions.                                                                *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* `kernels_main TEST` runs one function of kernels.mlir on in[i] = i + 1     *|
|* (256 floats) in device memory and prints what it checks, or the runtime's  *|
|* first error ("error: ...", exit status 1).                                 *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "vmoe/Runtime/CUDA/vmoe_cuda_runtime.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { kSize = 256 };

/// A memref<256xf32> as descriptor fields.
#define MEMREF float *, float *, int64_t, int64_t, int64_t
void reduce(MEMREF, MEMREF);
void reduce_racy(MEMREF, MEMREF);
void divergent(MEMREF, MEMREF);
void tall(MEMREF, MEMREF);
void warp_sum(MEMREF, MEMREF);
void mma_tf32(MEMREF, MEMREF);
void ldmatrix(MEMREF, MEMREF);
void async_copy(MEMREF, MEMREF, _Bool wait);

static float in[kSize], out[kSize];
static float *deviceIn, *deviceOut;

static int fail(void) {
  char error[512];
  vmoe_cuda_last_error(error, sizeof(error));
  printf("error: %s\n", error);
  return 1;
}

/// Copies `in` to the device and back `out` around `call`.
#define RUN(call)                                                              \
  do {                                                                         \
    if (vmoe_cuda_copy_to_device(deviceIn, in, sizeof(in)))                    \
      return fail();                                                           \
    call;                                                                      \
    if (vmoe_cuda_synchronize() ||                                             \
        vmoe_cuda_copy_to_host(out, deviceOut, sizeof(out)))                   \
      return fail();                                                           \
  } while (0)
#define ARGS deviceIn, deviceIn, 0, kSize, 1, deviceOut, deviceOut, 0, kSize, 1

int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  const char *test = argv[1];
  char message[512];
  if (vmoe_cuda_available(message, sizeof(message)) != 0) {
    printf("error: %s\n", message);
    return 1;
  }
  for (int i = 0; i < kSize; ++i)
    in[i] = (float)(i + 1);
  deviceIn = vmoe_cuda_alloc(sizeof(in));
  deviceOut = vmoe_cuda_alloc(sizeof(out));
  if (!deviceIn || !deviceOut)
    return fail();

  if (!strcmp(test, "reduce") || !strcmp(test, "racy")) {
    RUN((!strcmp(test, "reduce") ? reduce : reduce_racy)(ARGS));
    printf("%s: sum %.1f (expected %.1f)\n", test, out[0],
           kSize * (kSize + 1) / 2.0);
  } else if (!strcmp(test, "divergent")) {
    RUN(divergent(ARGS));
    printf("divergent: finished\n");
  } else if (!strcmp(test, "tall")) {
    RUN(tall(ARGS));
    printf("tall: finished\n");
  } else if (!strcmp(test, "warp_sum")) {
    RUN(warp_sum(ARGS));
    int wrong = 0;
    for (int i = 0; i < kSize; ++i) {
      int first = i / 32 * 32;
      float expected = 0;
      for (int j = first; j < first + 32; ++j)
        expected += in[j];
      wrong += out[i] != expected;
    }
    printf("warp_sum: out[0] %.1f out[255] %.1f, wrong %d\n", out[0],
           out[255], wrong);
  } else if (!strcmp(test, "mma_tf32")) {
    // Small integers: exact in TF32 and in the sums.
    for (int i = 0; i < 128; ++i)
      in[i] = (float)(i % 7 - 3);
    for (int i = 0; i < 64; ++i)
      in[128 + i] = (float)(i % 5 - 2);
    RUN(mma_tf32(ARGS));
    int wrong = 0;
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 8; ++c) {
        float expected = 0;
        for (int k = 0; k < 8; ++k)
          expected += in[8 * r + k] * in[128 + 8 * k + c];
        wrong += out[8 * r + c] != expected;
      }
    printf("mma_tf32: D[0][0] %.1f D[15][7] %.1f, wrong %d of 128\n", out[0],
           out[127], wrong);
  } else if (!strcmp(test, "ldmatrix")) {
    for (int i = 0; i < 64; ++i)
      in[i] = (float)i;
    RUN(ldmatrix(ARGS));
    int wrong = 0, wrongTrans = 0;
    for (int l = 0; l < 32; ++l)
      for (int h = 0; h < 2; ++h) {
        int row = l / 4, col = 2 * (l % 4) + h;
        wrong += out[2 * l + h] != (float)(8 * row + col);
        wrongTrans += out[64 + 2 * l + h] != (float)(8 * col + row);
      }
    printf("ldmatrix: lane 5 has %.0f %.0f, trans %.0f %.0f; wrong %d, "
           "trans wrong %d\n",
           out[10], out[11], out[74], out[75], wrong, wrongTrans);
  } else if (!strcmp(test, "async") || !strcmp(test, "async_nowait")) {
    RUN(async_copy(ARGS, !strcmp(test, "async")));
    int copied = 0, zeros = 0, nans = 0;
    for (int i = 0; i < kSize; ++i) {
      copied += out[i] == in[i];
      zeros += out[i] == 0.0f;
      nans += isnan(out[i]) != 0;
    }
    printf("%s: %d copied, %d zero-filled, %d NaN\n", test, copied, zeros,
           nans);
  } else {
    return 2;
  }
  return 0;
}
