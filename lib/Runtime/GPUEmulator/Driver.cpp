//===- Driver.cpp - The CUDA driver API of the GPU emulator -----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The driver functions the vmoe CUDA runtime (lib/Runtime/CUDA) resolves,
// for one emulated device whose memory is host memory:
// - modules are the registrations of vmoe-gpu-emulate-kernels, named by the
//   object string of their gpu.binary ("vmoe-emu:<token>"); any other image
//   (a real cubin) is CUDA_ERROR_INVALID_IMAGE;
// - launches run at once on the calling thread (Blocks.h), which keeps the
//   order of a stream; the hardware limits of grids and blocks are checked;
// - new device memory is filled with 0xff bytes (NaN floats), so reads of
//   memory never written show in results;
// - a failed launch prints one line and, as on a GPU, leaves the context
//   unusable: every later call returns CUDA_ERROR_LAUNCH_FAILED.
// Executables that link this library get it as their driver: a constructor
// sets $VMOE_CUDA_DRIVER to this library unless it is set. With
// $VMOE_EMU_TRACE=1 every launch is printed (kernel, grid, block).
//
//===----------------------------------------------------------------------===//

#include "Blocks.h"

#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

using namespace vmoe::emu;

#define EMU_API extern "C" __attribute__((visibility("default")))

namespace {

struct Module;

struct Kernel {
  std::string name;
  vmoe_emu_kernel_entry entry;
  Module *module;
};

struct Module {
  std::map<std::string, Kernel> kernels;
  std::vector<SharedVariable> shared;
};

/// Registered modules by token; handles are pointers into it (stable).
std::map<std::string, std::unique_ptr<Module>> &modules() {
  static std::map<std::string, std::unique_ptr<Module>> registry;
  return registry;
}

std::recursive_mutex &driverMutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

std::set<uintptr_t> allocations;
bool failed = false;
int contextToken, streamToken, eventToken;

/// Largest grid and block dimensions of NVIDIA GPUs since sm_30.
constexpr unsigned kMaxGridX = 2147483647u, kMaxGridYZ = 65535u,
                   kMaxBlockXY = 1024u, kMaxBlockZ = 64u,
                   kMaxBlockThreads = 1024u;
constexpr size_t kAlignment = 256;

CUresult allocate(CUdeviceptr *pointer, size_t bytes) {
  if (!pointer)
    return CUDA_ERROR_INVALID_VALUE;
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void *memory = std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment);
  if (!memory)
    return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(memory, 0xff, rounded);
  allocations.insert(reinterpret_cast<uintptr_t>(memory));
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  return CUDA_SUCCESS;
}

CUresult release(CUdeviceptr pointer) {
  if (!pointer)
    return CUDA_SUCCESS;
  auto it = allocations.find(static_cast<uintptr_t>(pointer));
  if (it == allocations.end())
    return CUDA_ERROR_INVALID_VALUE;
  allocations.erase(it);
  std::free(reinterpret_cast<void *>(pointer));
  return CUDA_SUCCESS;
}

/// CUDA_ERROR_LAUNCH_FAILED once a launch failed.
#define EMU_GUARD()                                                            \
  std::lock_guard<std::recursive_mutex> lock(driverMutex());                   \
  if (failed)                                                                  \
    return CUDA_ERROR_LAUNCH_FAILED;

} // namespace

/// Sets $VMOE_CUDA_DRIVER to this library, so that the vmoe CUDA runtime
/// of an executable that links it loads it instead of libcuda.so.1.
__attribute__((constructor)) static void selectEmulatorAsDriver() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&selectEmulatorAsDriver), &info) &&
      info.dli_fname)
    setenv("VMOE_CUDA_DRIVER", info.dli_fname, /*overwrite=*/0);
}

EMU_API void __vmoe_emu_register_kernel(const char *token, const char *name,
                                        vmoe_emu_kernel_entry entry) {
  std::lock_guard<std::recursive_mutex> lock(driverMutex());
  std::unique_ptr<Module> &module = modules()[token];
  if (!module)
    module = std::make_unique<Module>();
  module->kernels[name] = Kernel{name, entry, module.get()};
}

EMU_API void __vmoe_emu_register_shared(const char *token, void *address,
                                        uint64_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(driverMutex());
  std::unique_ptr<Module> &module = modules()[token];
  if (!module)
    module = std::make_unique<Module>();
  module->shared.push_back({address, bytes});
}

//===----------------------------------------------------------------------===//
// Driver, device, context
//===----------------------------------------------------------------------===//

CUresult CUDAAPI cuInit(unsigned int) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **text) {
  if (!text)
    return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
  case CUDA_SUCCESS: *text = "no error"; break;
  case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument"; break;
  case CUDA_ERROR_OUT_OF_MEMORY: *text = "out of memory"; break;
  case CUDA_ERROR_INVALID_IMAGE:
    *text = "device kernel image is invalid (the GPU emulator runs only "
            "kernels compiled with format=emulator)";
    break;
  case CUDA_ERROR_NOT_FOUND: *text = "named symbol not found"; break;
  case CUDA_ERROR_LAUNCH_FAILED: *text = "unspecified launch failure"; break;
  case CUDA_ERROR_NOT_SUPPORTED:
    *text = "operation not supported by the GPU emulator";
    break;
  default: *text = "unknown error"; break;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count) {
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal) {
  if (!device || ordinal != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice) {
  if (!context)
    return CUDA_ERROR_INVALID_VALUE;
  *context = reinterpret_cast<CUcontext>(&contextToken);
  return CUDA_SUCCESS;
}

static thread_local CUcontext currentContext = nullptr;

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *context) {
  if (!context)
    return CUDA_ERROR_INVALID_VALUE;
  *context = currentContext;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext context) {
  currentContext = context;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  EMU_GUARD();
  return CUDA_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Modules and launches
//===----------------------------------------------------------------------===//

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image) {
  EMU_GUARD();
  if (!module || !image)
    return CUDA_ERROR_INVALID_VALUE;
  const char *text = static_cast<const char *>(image);
  size_t prefix = std::strlen(VMOE_EMU_BINARY_PREFIX);
  if (std::strncmp(text, VMOE_EMU_BINARY_PREFIX, prefix) != 0)
    return CUDA_ERROR_INVALID_IMAGE;
  auto it = modules().find(text + prefix);
  if (it == modules().end())
    return CUDA_ERROR_NOT_FOUND;
  *module = reinterpret_cast<CUmodule>(it->second.get());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image,
                                    unsigned int, CUjit_option *, void **) {
  return cuModuleLoadData(module, image);
}

CUresult CUDAAPI cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuModuleGetFunction(CUfunction *function, CUmodule module,
                                     const char *name) {
  EMU_GUARD();
  if (!function || !module || !name)
    return CUDA_ERROR_INVALID_VALUE;
  Module *m = reinterpret_cast<Module *>(module);
  auto it = m->kernels.find(name);
  if (it == m->kernels.end())
    return CUDA_ERROR_NOT_FOUND;
  *function = reinterpret_cast<CUfunction>(&it->second);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) {
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction function, unsigned int gridX,
                                unsigned int gridY, unsigned int gridZ,
                                unsigned int blockX, unsigned int blockY,
                                unsigned int blockZ, unsigned int sharedBytes,
                                CUstream, void **params, void **extra) {
  EMU_GUARD();
  if (!function)
    return CUDA_ERROR_INVALID_HANDLE;
  if (extra)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (sharedBytes != 0)
    return CUDA_ERROR_NOT_SUPPORTED; // no kernel uses dynamic shared memory
  if (gridX < 1 || gridY < 1 || gridZ < 1 || blockX < 1 || blockY < 1 ||
      blockZ < 1 || gridX > kMaxGridX || gridY > kMaxGridYZ ||
      gridZ > kMaxGridYZ || blockX > kMaxBlockXY || blockY > kMaxBlockXY ||
      blockZ > kMaxBlockZ ||
      static_cast<uint64_t>(blockX) * blockY * blockZ > kMaxBlockThreads)
    return CUDA_ERROR_INVALID_VALUE;
  const Kernel &kernel = *reinterpret_cast<const Kernel *>(function);
  static const bool trace = [] {
    const char *value = std::getenv("VMOE_EMU_TRACE");
    return value && *value && std::strcmp(value, "0") != 0;
  }();
  if (trace)
    std::fprintf(stderr,
                 "vmoe-gpu-emulator: launch %s grid %u x %u x %u block %u x "
                 "%u x %u\n",
                 kernel.name.c_str(), gridX, gridY, gridZ, blockX, blockY,
                 blockZ);
  std::string error;
  if (!runGrid(kernel.entry, params, Dim3{gridX, gridY, gridZ},
               Dim3{blockX, blockY, blockZ}, kernel.module->shared, error)) {
    std::fprintf(stderr, "vmoe-gpu-emulator: kernel %s, %s\n",
                 kernel.name.c_str(), error.c_str());
    failed = true;
    return CUDA_ERROR_LAUNCH_FAILED;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *, CUfunction,
                                  void **, void **) {
  return CUDA_ERROR_NOT_SUPPORTED;
}

//===----------------------------------------------------------------------===//
// Streams and events: work runs when enqueued, so they only order nothing.
//===----------------------------------------------------------------------===//

CUresult CUDAAPI cuStreamCreate(CUstream *stream, unsigned int) {
  EMU_GUARD();
  if (!stream)
    return CUDA_ERROR_INVALID_VALUE;
  *stream = reinterpret_cast<CUstream>(&streamToken);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuStreamSynchronize(CUstream) {
  EMU_GUARD();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream, CUevent, unsigned int) {
  EMU_GUARD();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent *event, unsigned int) {
  EMU_GUARD();
  if (!event)
    return CUDA_ERROR_INVALID_VALUE;
  *event = reinterpret_cast<CUevent>(&eventToken);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuEventRecord(CUevent, CUstream) {
  EMU_GUARD();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventSynchronize(CUevent) {
  EMU_GUARD();
  return CUDA_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *pointer, size_t bytes) {
  EMU_GUARD();
  return allocate(pointer, bytes);
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *pointer, size_t bytes,
                                 CUstream) {
  EMU_GUARD();
  return allocate(pointer, bytes);
}

CUresult CUDAAPI cuMemFree(CUdeviceptr pointer) {
  std::lock_guard<std::recursive_mutex> lock(driverMutex());
  return release(pointer);
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr pointer, CUstream) {
  std::lock_guard<std::recursive_mutex> lock(driverMutex());
  return release(pointer);
}

CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr destination, const void *source,
                              size_t bytes) {
  EMU_GUARD();
  std::memcpy(reinterpret_cast<void *>(destination), source, bytes);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyDtoH(void *destination, CUdeviceptr source,
                              size_t bytes) {
  EMU_GUARD();
  std::memcpy(destination, reinterpret_cast<const void *>(source), bytes);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr destination, CUdeviceptr source,
                               size_t bytes, CUstream) {
  EMU_GUARD();
  std::memmove(reinterpret_cast<void *>(destination),
               reinterpret_cast<const void *>(source), bytes);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr destination, unsigned int value,
                                  size_t count, CUstream) {
  EMU_GUARD();
  uint32_t *words = reinterpret_cast<uint32_t *>(destination);
  for (size_t i = 0; i < count; ++i)
    words[i] = value;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr destination,
                                  unsigned short value, size_t count,
                                  CUstream) {
  EMU_GUARD();
  uint16_t *halves = reinterpret_cast<uint16_t *>(destination);
  for (size_t i = 0; i < count; ++i)
    halves[i] = value;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostRegister(void *, size_t, unsigned int) {
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostUnregister(void *) { return CUDA_SUCCESS; }
