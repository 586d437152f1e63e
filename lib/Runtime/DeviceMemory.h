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
#include <cstdint>

extern "C" {
__attribute__((weak)) int vmoe_cuda_available(char *error, size_t size);
__attribute__((weak)) int vmoe_cuda_last_error(char *error, size_t size);
__attribute__((weak)) int vmoe_cuda_synchronize(void);
__attribute__((weak)) void *vmoe_cuda_alloc(size_t bytes);
__attribute__((weak)) int vmoe_cuda_copy_to_device(void *device,
                                                   const void *host,
                                                   size_t bytes);
__attribute__((weak)) int vmoe_cuda_copy_to_host(void *host,
                                                 const void *device,
                                                 size_t bytes);
__attribute__((weak)) void vmoe_cuda_free(void *pointer);
}

namespace vmoe::runtime {

/// True when this executable links the GPU runtime.
inline bool hasCudaRuntime() {
  return vmoe_cuda_available && vmoe_cuda_last_error &&
         vmoe_cuda_synchronize && vmoe_cuda_alloc && vmoe_cuda_copy_to_device &&
         vmoe_cuda_copy_to_host && vmoe_cuda_free;
}

/// An owned array of `count` elements of `T` in device memory (cuMemAlloc;
/// never managed memory). Empty until allocate() succeeds.
template <typename T> class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { reset(); }

  /// Allocates `count` elements; false (error recorded by the GPU runtime)
  /// on failure or overflow.
  bool allocate(size_t count) {
    reset();
    if (!hasCudaRuntime() || count > SIZE_MAX / sizeof(T))
      return false;
    data = static_cast<T *>(vmoe_cuda_alloc(count ? count * sizeof(T) : 1));
    size = data ? count : 0;
    return data != nullptr;
  }
  /// Copies `count` elements from the host to the start of the buffer.
  bool upload(const T *host, size_t count) {
    return count <= size &&
           vmoe_cuda_copy_to_device(data, host, count * sizeof(T)) == 0;
  }
  /// Copies the first `count` elements to the host.
  bool download(T *host, size_t count) const {
    return count <= size &&
           vmoe_cuda_copy_to_host(host, data, count * sizeof(T)) == 0;
  }
  T *get() const { return data; }
  size_t length() const { return size; }

private:
  void reset() {
    if (data)
      vmoe_cuda_free(data);
    data = nullptr;
    size = 0;
  }

  T *data = nullptr;
  size_t size = 0;
};

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_DEVICEMEMORY_H
