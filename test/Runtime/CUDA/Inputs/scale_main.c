/*===- scale_main.c - Runs the compiled scale.mlir ----------------*- C -*-===*\
|*                                                                            *|
|* Part of the vmoe project, under the Apache License v2.0 with LLVM          *|
|* Exceptions.                                                                *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* The host side of test/Runtime/CUDA: checks the GPU with                    *|
|* vmoe_cuda_available() (one "error: ..." line and exit status 1 when it     *|
|* cannot be used, as model executables do), then doubles 0, 1, ..., 1023 in  *|
|* managed memory with the compiled @scale and checks the result. With an     *|
|* argument T > 0, T threads each double their own array twice, so that the   *|
|* runtime must make its context current in threads it has not seen. With    *|
|* "unchecked", it skips the check and calls @scale on host memory, as a      *|
|* careless program would: nothing may crash, the array stays unchanged, and  *|
|* the runtime prints the error nobody asked for at exit. With "idle", it     *|
|* returns at once: the failed module load alone prints nothing.              *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "vmoe/Runtime/CUDA/vmoe_cuda_runtime.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kSize = 1024, kMaxThreads = 16 };

/// The compiled function: memref<1024xf32> as descriptor fields.
void scale(float *allocated, float *aligned, int64_t offset, int64_t size,
           int64_t stride);

static int fail(void) {
  char error[512];
  vmoe_cuda_last_error(error, sizeof(error));
  fprintf(stderr, "error: %s\n", error);
  return 1;
}

/// Counts the elements of the device array `device` that differ from
/// factor * index (copied to the host first); -1 when the copy fails.
static int countWrong(const float *device, float factor, float *host) {
  if (vmoe_cuda_copy_to_host(host, device, kSize * sizeof(float)))
    return -1;
  int wrong = 0;
  for (int i = 0; i < kSize; ++i)
    wrong += host[i] != factor * (float)i;
  return wrong;
}

/// A device array holding 0, 1, ..., kSize - 1.
static float *newArray(void) {
  float host[kSize];
  for (int i = 0; i < kSize; ++i)
    host[i] = (float)i;
  float *data = vmoe_cuda_alloc(kSize * sizeof(float));
  if (data && vmoe_cuda_copy_to_device(data, host, sizeof(host)))
    return NULL;
  return data;
}

static void *worker(void *argument) {
  float *data = argument;
  scale(data, data, 0, kSize, 1);
  scale(data, data, 0, kSize, 1);
  return NULL;
}

int main(int argc, char **argv) {
  // Unbuffered, so that results and driver traces (stderr) interleave in
  // the order they happen.
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc > 1 && strcmp(argv[1], "idle") == 0)
    return 0;
  if (argc > 1 && strcmp(argv[1], "unchecked") == 0) {
    float data[kSize];
    for (int i = 0; i < kSize; ++i)
      data[i] = (float)i;
    scale(data, data, 0, kSize, 1);
    printf("unchecked: a[1] = %g\n", data[1]);
    return 0;
  }
  int threads = argc > 1 ? atoi(argv[1]) : 0;
  if (threads < 0 || threads > kMaxThreads)
    threads = kMaxThreads;
  char error[512];
  if (vmoe_cuda_available(error, sizeof(error))) {
    fprintf(stderr, "error: %s\n", error);
    return 1;
  }

  if (threads == 0) {
    float *data = newArray();
    if (!data)
      return fail();
    scale(data, data, 0, kSize, 1);
    if (vmoe_cuda_synchronize())
      return fail();
    float host[kSize];
    int wrong = countWrong(data, 2, host);
    if (wrong < 0)
      return fail();
    printf("a[0] = %g, a[1] = %g, a[1023] = %g, wrong: %d\n", host[0],
           host[1], host[1023], wrong);
    vmoe_cuda_free(data);
    return vmoe_cuda_last_error(error, sizeof(error)) ? fail() : 0;
  }

  float *arrays[kMaxThreads];
  pthread_t ids[kMaxThreads];
  for (int t = 0; t < threads; ++t)
    if (!(arrays[t] = newArray()))
      return fail();
  for (int t = 0; t < threads; ++t)
    pthread_create(&ids[t], NULL, worker, arrays[t]);
  for (int t = 0; t < threads; ++t)
    pthread_join(ids[t], NULL);
  if (vmoe_cuda_synchronize())
    return fail();
  int wrong = 0;
  for (int t = 0; t < threads; ++t) {
    float host[kSize];
    int count = countWrong(arrays[t], 4, host);
    if (count < 0)
      return fail();
    wrong += count;
    vmoe_cuda_free(arrays[t]);
  }
  printf("%d threads, wrong: %d\n", threads, wrong);
  return vmoe_cuda_last_error(error, sizeof(error)) ? fail() : 0;
}
