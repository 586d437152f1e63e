//===- DeviceMemory.h - Optional GPU runtime hooks --------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The model runtime serves CPU and CUDA models. A CUDA model executable also
// links vmoe_cuda_runtime (lib/Runtime/CUDA); the runtime reaches it through
// these weak declarations, which are null in a CPU-only executable, so the
// CPU runtime does not depend on CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_DEVICEMEMORY_H
#define LIB_RUNTIME_DEVICEMEMORY_H

#include <cstddef>

extern "C" {
__attribute__((weak)) int vmoe_cuda_available(char *error, size_t size);
__attribute__((weak)) int vmoe_cuda_last_error(char *error, size_t size);
__attribute__((weak)) int vmoe_cuda_synchronize(void);
__attribute__((weak)) void *vmoe_cuda_alloc_managed(size_t bytes);
__attribute__((weak)) void vmoe_cuda_free(void *pointer);
}

namespace vmoe::runtime {

/// True when this executable links the GPU runtime.
inline bool hasCudaRuntime() {
  return vmoe_cuda_available && vmoe_cuda_last_error &&
         vmoe_cuda_synchronize && vmoe_cuda_alloc_managed && vmoe_cuda_free;
}

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_DEVICEMEMORY_H
