/*===- vmoe_cuda_runtime.h - GPU host runtime of compiled models --*- C -*-===*\
|*                                                                            *|
|* Part of the vmoe project, under the Apache License v2.0 with LLVM          *|
|* Exceptions.                                                                *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* The C API of vmoe_cuda_runtime (lib/Runtime/CUDA), the library that        *|
|* implements the "mgpu" functions MLIR's gpu-to-llvm lowering calls          *|
|* (module load, kernel launch, streams, events, memory) on the CUDA driver   *|
|* API. The driver, libcuda.so.1, is loaded at run time, so a model           *|
|* executable starts on a machine without a driver or GPU and reports that    *|
|* in one line instead of failing in the dynamic loader. The environment      *|
|* variable VMOE_CUDA_DRIVER names another driver library (tests);            *|
|* VMOE_CUDA_VERBOSE=1 prints every failing driver call on stderr.            *|
|*                                                                            *|
|* Errors: the mgpu functions cannot return errors to the compiled code, so   *|
|* the runtime records the first failure, "<call> failed: <CUDA message>",    *|
|* and later calls keep going (failed allocations return NULL, launches of a  *|
|* kernel that did not load are skipped). The first error is sticky: a        *|
|* program asks for it with vmoe_cuda_last_error() after a forward pass and   *|
|* vmoe_cuda_available() before the first one. An error nobody asked for is   *|
|* printed as "vmoe-cuda: <message>" on stderr when the process exits, if the *|
|* program went on to use the GPU (launches, allocations, ...).               *|
|*                                                                            *|
|* Conventions as in vmoe_runtime.h: functions returning int return 0 on      *|
|* success and non-zero on failure, with a one-line, NUL-terminated message   *|
|* in `error` (truncated to `error_size` bytes; `error` may be NULL). All     *|
|* functions are thread-safe; the primary context of the device is made       *|
|* current in every calling thread, OpenMP workers included.                  *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef VMOE_RUNTIME_CUDA_VMOE_CUDA_RUNTIME_H
#define VMOE_RUNTIME_CUDA_VMOE_CUDA_RUNTIME_H

#include <stddef.h>

/// Exported from shared libraries; the rest of the runtime is hidden.
#if defined(__GNUC__) || defined(__clang__)
#define VMOE_CUDA_API __attribute__((visibility("default")))
#else
#define VMOE_CUDA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/// Returns 0 when the GPU can be used: the driver loads, cuInit succeeds, the
/// device (0 unless the compiled code selected another) exists and its
/// primary context is current in the calling thread, and no error has been
/// recorded so far (a kernel module that failed to load when the program
/// started counts). Otherwise returns 1 with the first error in `error`.
VMOE_CUDA_API int vmoe_cuda_available(char *error, size_t error_size);

/// Returns 1 and copies the first recorded error into `error` when there is
/// one; returns 0 and writes "" otherwise.
VMOE_CUDA_API int vmoe_cuda_last_error(char *error, size_t error_size);

/// Waits for all work of the device (cuCtxSynchronize). Returns 0, or 1 when
/// this or any earlier call failed (vmoe_cuda_last_error() has the message).
VMOE_CUDA_API int vmoe_cuda_synchronize(void);

/// Allocates `bytes` (at least 1) of device memory (cuMemAlloc), aligned to
/// at least 256 bytes; the host cannot read it directly. Returns NULL on
/// failure, with the error recorded ("cuMemAlloc(N bytes) failed: ...").
VMOE_CUDA_API void *vmoe_cuda_alloc(size_t bytes);

/// Copies `bytes` from host memory to device memory from vmoe_cuda_alloc()
/// (cuMemcpyHtoD: returns when the copy is done). Returns 0, or 1 when this
/// or an earlier call failed; a NULL pointer is an error, not a crash.
VMOE_CUDA_API int vmoe_cuda_copy_to_device(void *device, const void *host,
                                           size_t bytes);

/// Copies `bytes` from device memory to host memory (cuMemcpyDtoH, after
/// the work queued before it on the legacy stream). Returns as
/// vmoe_cuda_copy_to_device().
VMOE_CUDA_API int vmoe_cuda_copy_to_host(void *host, const void *device,
                                         size_t bytes);

/// Frees memory from vmoe_cuda_alloc(); NULL is a no-op.
VMOE_CUDA_API void vmoe_cuda_free(void *pointer);

#ifdef __cplusplus
}
#endif

#endif /* VMOE_RUNTIME_CUDA_VMOE_CUDA_RUNTIME_H */
