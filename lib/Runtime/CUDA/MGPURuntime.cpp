//===- MGPURuntime.cpp - The mgpu ABI on the CUDA driver API ----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// MLIR's gpu-to-llvm lowering turns gpu.launch_func, gpu.alloc, gpu.memcpy,
// gpu.wait and the gpu.module binaries into calls of "mgpu" functions that
// upstream implements in mlir/lib/ExecutionEngine/CudaRuntimeWrappers.cpp
// (libmlir_cuda_runtime.so, which Debian does not ship). This file implements
// the same C ABI, with the signatures gpu-to-llvm of LLVM 22 declares, plus
// the C API of include/vmoe/Runtime/CUDA/vmoe_cuda_runtime.h.
//
// Differences from upstream, all for compiled models that must fail cleanly:
// - libcuda.so.1 is loaded with dlopen on first use, so an executable starts
//   without a driver; the entry points are the versioned names cuda.h maps
//   to (cuMemAlloc -> cuMemAlloc_v2), so the driver ABI is the header's.
// - Errors are recorded (first one sticky), not only printed; vmoe_cuda_*
//   return them. After a failure the mgpu calls degrade to no-ops that
//   return NULL, so the compiled code runs to its end without crashing.
// - The primary context of the default device is made current with
//   cuCtxSetCurrent in every calling thread and left there (upstream pushes
//   and pops it around each call); the default device is process-wide, not
//   per thread, so that OpenMP workers use the device main() selected.
// - Dynamic shared memory above 48 KiB is enabled per launch.
//
// The kernel modules of a compiled object are loaded by global constructors
// of priority 123, before any C++ dynamic initialization, and unloaded by
// global destructors after atexit handlers ran. All state is therefore
// constant-initialized and trivially destructible, and the library needs no
// C++ runtime (no libstdc++, no exceptions): plain libc, libdl, pthreads.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Runtime/CUDA/vmoe_cuda_runtime.h"

#include <cuda.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <pthread.h>

/// The mgpu entry points are called by compiled code and must stay visible in
/// shared libraries built from a model (the rest of the library is hidden).
#define MGPU_API extern "C" __attribute__((visibility("default")))

namespace {

//===----------------------------------------------------------------------===//
// The driver library
//===----------------------------------------------------------------------===//

/// Every driver function the runtime calls. The names are macros in cuda.h
/// for functions with several ABI versions; the members and the looked-up
/// symbol names both go through the macros, so they are the header's.
#define VMOE_CUDA_DRIVER_FUNCTIONS(X)                                          \
  X(cuInit)                                                                    \
  X(cuGetErrorString)                                                          \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuCtxGetCurrent)                                                           \
  X(cuCtxSetCurrent)                                                           \
  X(cuCtxSynchronize)                                                          \
  X(cuModuleLoadData)                                                          \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuLaunchKernelEx)                                                          \
  X(cuStreamCreate)                                                            \
  X(cuStreamDestroy)                                                           \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamWaitEvent)                                                         \
  X(cuEventCreate)                                                             \
  X(cuEventDestroy)                                                            \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemAllocAsync)                                                           \
  X(cuMemFreeAsync)                                                            \
  X(cuMemcpyHtoD)                                                              \
  X(cuMemcpyDtoH)                                                              \
  X(cuMemcpyAsync)                                                             \
  X(cuMemsetD32Async)                                                          \
  X(cuMemsetD16Async)                                                          \
  X(cuMemHostRegister)                                                         \
  X(cuMemHostUnregister)

#define VMOE_CUDA_STRINGIFY(name) #name
/// The symbol name after macro expansion ("cuMemAlloc_v2").
#define VMOE_CUDA_SYMBOL(name) VMOE_CUDA_STRINGIFY(name)

/// Pointers to the driver's functions, filled once by loadDriver().
struct DriverApi {
#define VMOE_CUDA_DECLARE(name) decltype(&::name) name = nullptr;
  VMOE_CUDA_DRIVER_FUNCTIONS(VMOE_CUDA_DECLARE)
#undef VMOE_CUDA_DECLARE
};

/// The head of a ranked memref descriptor; sizes[rank] and strides[rank]
/// (int64_t) follow it.
struct MemRefHead {
  char *allocated;
  char *aligned;
  int64_t offset;
};

} // namespace

/// Longest error message kept, including the NUL.
static constexpr size_t kMessageSize = 512;
/// Devices the runtime can hold a primary context for.
static constexpr int kMaxDevices = 64;
/// Dynamic shared memory a kernel gets without opting in.
static constexpr int32_t kDefaultSharedMemoryLimit = 48 * 1024;

/// The driver's functions; valid once `driverOnce` ran and `driverLoaded`.
static DriverApi driver;
static pthread_once_t driverOnce = PTHREAD_ONCE_INIT;
static bool driverLoaded = false;
/// Devices the driver reported (> 0 once driverLoaded).
static int deviceCount = 0;

/// The primary context of each device, retained on first use and never
/// released (it lives as long as the process).
static std::atomic<CUcontext> primaryContexts[kMaxDevices];
static pthread_mutex_t contextMutex = PTHREAD_MUTEX_INITIALIZER;
/// The device of the kernels and allocations that follow
/// (mgpuSetDefaultDevice); process-wide.
static std::atomic<int32_t> defaultDevice{0};

/// The first error, its state, guarded by errorMutex.
static pthread_mutex_t errorMutex = PTHREAD_MUTEX_INITIALIZER;
static char firstError[kMessageSize];
static bool hasError = false;
/// Whether a vmoe_cuda_* call handed the first error to the program.
static bool errorReported = false;
/// Lock-free copy of hasError for the fast paths.
static std::atomic<bool> anyError{false};
/// Whether the program used the GPU (anything but loading and unloading
/// the modules of the compiled object, which happens before main() and after
/// it returns).
static std::atomic<bool> gpuUsed{false};

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// Prints the first error at exit unless the program asked for it or never
/// used the GPU (a model executable that stops at a bad option on a machine
/// without GPU prints its own error only).
static void printUnreportedError() {
  pthread_mutex_lock(&errorMutex);
  if (hasError && !errorReported && gpuUsed.load(std::memory_order_relaxed))
    std::fprintf(stderr, "vmoe-cuda: %s\n", firstError);
  errorReported = true;
  pthread_mutex_unlock(&errorMutex);
}

/// Whether VMOE_CUDA_VERBOSE asks to print every failure when it happens.
static bool isVerbose() {
  const char *value = std::getenv("VMOE_CUDA_VERBOSE");
  return value && *value && std::strcmp(value, "0") != 0;
}

/// Records a failure (printf-style, one line). The first one is kept.
__attribute__((format(printf, 1, 2))) static void
recordError(const char *format, ...) {
  char message[kMessageSize];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  if (isVerbose())
    std::fprintf(stderr, "vmoe-cuda: %s\n", message);

  pthread_mutex_lock(&errorMutex);
  bool first = !hasError;
  if (first) {
    std::memcpy(firstError, message, sizeof(message));
    hasError = true;
    anyError.store(true, std::memory_order_release);
  }
  pthread_mutex_unlock(&errorMutex);
  if (first)
    std::atexit(printUnreportedError);
}

/// The driver's description of `result`; for a driver that has none (the
/// toolkit's stub library describes nothing) the codes that tell what is
/// wrong with the installation, else null.
static const char *describe(CUresult result) {
  const char *text = nullptr;
  if (driver.cuGetErrorString &&
      driver.cuGetErrorString(result, &text) == CUDA_SUCCESS && text)
    return text;
  switch (result) {
  case CUDA_ERROR_STUB_LIBRARY:
    return "CUDA driver is a stub library";
  case CUDA_ERROR_NO_DEVICE:
    return "no CUDA-capable device is detected";
  default:
    return nullptr;
  }
}

/// Returns true on success; records "<call> failed: <message>" otherwise.
static bool check(CUresult result, const char *call) {
  if (result == CUDA_SUCCESS)
    return true;
  if (const char *text = describe(result))
    recordError("%s failed: %s", call, text);
  else
    recordError("%s failed: CUDA error %d", call, static_cast<int>(result));
  return false;
}

/// Copies the first error into the caller's buffer and marks it reported.
/// Returns 1 when there is one, else 0 (and writes "").
static int takeError(char *error, size_t errorSize) {
  pthread_mutex_lock(&errorMutex);
  int result = hasError ? 1 : 0;
  if (error && errorSize > 0)
    std::snprintf(error, errorSize, "%s", hasError ? firstError : "");
  if (hasError)
    errorReported = true;
  pthread_mutex_unlock(&errorMutex);
  return result;
}

//===----------------------------------------------------------------------===//
// Driver and contexts
//===----------------------------------------------------------------------===//

/// Loads libcuda.so.1 (or $VMOE_CUDA_DRIVER), resolves every function and
/// initializes the driver. Runs once; failures are recorded.
static void loadDriver() {
  const char *path = std::getenv("VMOE_CUDA_DRIVER");
  if (!path || !*path)
    path = "libcuda.so.1";
  void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *reason = dlerror();
    recordError("cannot load the CUDA driver: %s", reason ? reason : path);
    return;
  }

  DriverApi api;
#define VMOE_CUDA_RESOLVE(name)                                                \
  api.name = reinterpret_cast<decltype(api.name)>(                             \
      dlsym(library, VMOE_CUDA_SYMBOL(name)));                                 \
  if (!api.name) {                                                             \
    recordError("the CUDA driver %s lacks %s (driver too old?)", path,         \
                VMOE_CUDA_SYMBOL(name));                                       \
    return;                                                                    \
  }
  VMOE_CUDA_DRIVER_FUNCTIONS(VMOE_CUDA_RESOLVE)
#undef VMOE_CUDA_RESOLVE
  driver = api;

  if (!check(driver.cuInit(0), "cuInit"))
    return;
  int count = 0;
  if (!check(driver.cuDeviceGetCount(&count), "cuDeviceGetCount"))
    return;
  if (count < 1) {
    recordError("no CUDA device found");
    return;
  }
  deviceCount = count;
  driverLoaded = true;
}

/// Whether the driver is loaded and has a device; loads it on first call.
static bool ensureDriver() {
  pthread_once(&driverOnce, loadDriver);
  return driverLoaded;
}

/// The primary context of `ordinal`, retained on first use; null on failure.
static CUcontext getPrimaryContext(int32_t ordinal) {
  if (ordinal < 0 || ordinal >= deviceCount || ordinal >= kMaxDevices) {
    recordError("CUDA device %d does not exist (%d devices)", ordinal,
                deviceCount);
    return nullptr;
  }
  CUcontext context = primaryContexts[ordinal].load(std::memory_order_acquire);
  if (context)
    return context;

  pthread_mutex_lock(&contextMutex);
  context = primaryContexts[ordinal].load(std::memory_order_acquire);
  if (!context) {
    CUdevice device;
    CUcontext retained = nullptr;
    if (check(driver.cuDeviceGet(&device, ordinal), "cuDeviceGet") &&
        check(driver.cuDevicePrimaryCtxRetain(&retained, device),
              "cuDevicePrimaryCtxRetain")) {
      context = retained;
      primaryContexts[ordinal].store(context, std::memory_order_release);
    }
  }
  pthread_mutex_unlock(&contextMutex);
  return context;
}

/// Makes the primary context of the default device current in this thread,
/// loading the driver first if needed. Returns false (error recorded) when
/// the GPU cannot be used.
static bool bindContext() {
  if (!ensureDriver())
    return false;
  CUcontext context =
      getPrimaryContext(defaultDevice.load(std::memory_order_relaxed));
  if (!context)
    return false;
  CUcontext current = nullptr;
  if (!check(driver.cuCtxGetCurrent(&current), "cuCtxGetCurrent"))
    return false;
  if (current == context)
    return true;
  return check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent");
}

/// bindContext() for every entry point that uses the GPU.
static bool enterGpu() {
  gpuUsed.store(true, std::memory_order_relaxed);
  return bindContext();
}

/// Whether `value` fits a launch dimension of the driver (1 to 2^32 - 1).
static bool isLaunchDim(intptr_t value) {
  return value >= 1 && static_cast<uint64_t>(value) <= UINT32_MAX;
}

/// Checks the launch dimensions and, for more than 48 KiB of dynamic shared
/// memory, opts the kernel in. Returns false with the error recorded.
static bool prepareLaunch(CUfunction function, const char *caller,
                          const intptr_t (&dims)[6], int32_t sharedMemory) {
  if (!function) {
    recordError("%s: no kernel (its module did not load)", caller);
    return false;
  }
  for (intptr_t dim : dims) {
    if (!isLaunchDim(dim)) {
      recordError("%s: grid %ld x %ld x %ld, block %ld x %ld x %ld out of "
                  "range",
                  caller, static_cast<long>(dims[0]),
                  static_cast<long>(dims[1]), static_cast<long>(dims[2]),
                  static_cast<long>(dims[3]), static_cast<long>(dims[4]),
                  static_cast<long>(dims[5]));
      return false;
    }
  }
  if (sharedMemory < 0) {
    recordError("%s: negative dynamic shared memory size %d", caller,
                sharedMemory);
    return false;
  }
  if (sharedMemory > kDefaultSharedMemoryLimit)
    return check(driver.cuFuncSetAttribute(
                     function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                     sharedMemory),
                 "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  return true;
}

/// The first byte and the extent in bytes of the elements of a memref of
/// `rank` with `elementSize`-byte elements. Returns false for a memref with
/// no elements or negative strides (nothing to register).
static bool getMemRefSpan(int64_t rank, const MemRefHead *head,
                          int64_t elementSize, char **begin, uint64_t *bytes) {
  const int64_t *sizes = reinterpret_cast<const int64_t *>(head + 1);
  const int64_t *strides = sizes + rank;
  // Offset of the last element, in elements.
  int64_t last = 0;
  for (int64_t dim = 0; dim < rank; ++dim) {
    if (sizes[dim] <= 0 || strides[dim] < 0)
      return false;
    last += (sizes[dim] - 1) * strides[dim];
  }
  *begin = head->aligned + head->offset * elementSize;
  *bytes = static_cast<uint64_t>(last + 1) * elementSize;
  return true;
}

//===----------------------------------------------------------------------===//
// The mgpu ABI (the signatures gpu-to-llvm of LLVM 22 declares)
//===----------------------------------------------------------------------===//

/// Loads a cubin or fatbin (gpu-module-to-binary format=bin|fatbin); a global
/// constructor of the compiled object calls it. `size` is not needed: both
/// formats are self-describing.
MGPU_API CUmodule mgpuModuleLoad(void *data, size_t /*size*/) {
  if (!bindContext())
    return nullptr;
  CUmodule module = nullptr;
  if (!check(driver.cuModuleLoadData(&module, data), "cuModuleLoadData"))
    return nullptr;
  return module;
}

/// Compiles and loads NUL-terminated PTX (format=isa) at `optLevel` (0-4).
MGPU_API CUmodule mgpuModuleLoadJIT(void *data, int32_t optLevel) {
  if (!bindContext())
    return nullptr;
  char log[kMessageSize / 2] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_OPTIMIZATION_LEVEL};
  void *values[] = {log, reinterpret_cast<void *>(uintptr_t{sizeof(log)}),
                    reinterpret_cast<void *>(static_cast<uintptr_t>(
                        optLevel < 0 ? 0 : (optLevel > 4 ? 4 : optLevel)))};
  CUmodule module = nullptr;
  CUresult result = driver.cuModuleLoadDataEx(
      &module, data, sizeof(options) / sizeof(options[0]), options, values);
  if (result == CUDA_SUCCESS)
    return module;
  // The log may span lines; keep the first.
  log[sizeof(log) - 1] = 0;
  log[std::strcspn(log, "\r\n")] = 0;
  const char *text = describe(result);
  recordError("cuModuleLoadDataEx (PTX JIT) failed: %s%s%s",
              text ? text : "CUDA error", log[0] ? ": " : "", log);
  return nullptr;
}

/// Unloads a module (global destructor of the compiled object). Silent when
/// the driver is already shut down at process exit: it runs its own atexit
/// handler first, and then every call, cuCtxGetCurrent included, fails with
/// CUDA_ERROR_DEINITIALIZED (the module is gone with it).
MGPU_API void mgpuModuleUnload(CUmodule module) {
  if (!module || !ensureDriver())
    return;
  CUcontext current = nullptr;
  if (driver.cuCtxGetCurrent(&current) == CUDA_ERROR_DEINITIALIZED ||
      !bindContext())
    return;
  CUresult result = driver.cuModuleUnload(module);
  if (result != CUDA_ERROR_DEINITIALIZED)
    check(result, "cuModuleUnload");
}

MGPU_API CUfunction mgpuModuleGetFunction(CUmodule module, const char *name) {
  gpuUsed.store(true, std::memory_order_relaxed);
  if (!module) {
    recordError("kernel %s: its module did not load", name ? name : "?");
    return nullptr;
  }
  if (!enterGpu())
    return nullptr;
  CUfunction function = nullptr;
  if (!check(driver.cuModuleGetFunction(&function, module, name),
             "cuModuleGetFunction"))
    return nullptr;
  return function;
}

/// Launches `function`; `params` holds one pointer per kernel argument.
/// The sizes are index (intptr_t) in the compiled code. `paramsCount` is for
/// other runtimes (Level Zero) and unused here.
MGPU_API void mgpuLaunchKernel(CUfunction function, intptr_t gridX,
                               intptr_t gridY, intptr_t gridZ, intptr_t blockX,
                               intptr_t blockY, intptr_t blockZ, int32_t smem,
                               CUstream stream, void **params, void **extra,
                               size_t /*paramsCount*/) {
  // After a failure (a null allocation among the arguments, say) nothing
  // more is launched.
  if (!enterGpu() || anyError.load(std::memory_order_acquire))
    return;
  const intptr_t dims[6] = {gridX, gridY, gridZ, blockX, blockY, blockZ};
  if (!prepareLaunch(function, "mgpuLaunchKernel", dims, smem))
    return;
  // prepareLaunch() checked that every dimension fits.
  check(driver.cuLaunchKernel(
            function, static_cast<unsigned>(gridX),
            static_cast<unsigned>(gridY), static_cast<unsigned>(gridZ),
            static_cast<unsigned>(blockX), static_cast<unsigned>(blockY),
            static_cast<unsigned>(blockZ), static_cast<unsigned>(smem), stream,
            params, extra),
        "cuLaunchKernel");
}

/// Launches `function` with thread-block clusters (sm_90); the grid counts
/// blocks, as for cuLaunchKernelEx.
MGPU_API void mgpuLaunchClusterKernel(CUfunction function, intptr_t clusterX,
                                      intptr_t clusterY, intptr_t clusterZ,
                                      intptr_t gridX, intptr_t gridY,
                                      intptr_t gridZ, intptr_t blockX,
                                      intptr_t blockY, intptr_t blockZ,
                                      int32_t smem, CUstream stream,
                                      void **params, void **extra) {
  if (!enterGpu())
    return;
  const intptr_t dims[6] = {gridX, gridY, gridZ, blockX, blockY, blockZ};
  if (!prepareLaunch(function, "mgpuLaunchClusterKernel", dims, smem))
    return;
  if (!isLaunchDim(clusterX) || !isLaunchDim(clusterY) ||
      !isLaunchDim(clusterZ)) {
    recordError("mgpuLaunchClusterKernel: cluster %ld x %ld x %ld out of range",
                static_cast<long>(clusterX), static_cast<long>(clusterY),
                static_cast<long>(clusterZ));
    return;
  }
  // More than 8 blocks per cluster needs the non-portable opt-in.
  if (clusterX * clusterY * clusterZ > 8 &&
      !check(
          driver.cuFuncSetAttribute(
              function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
          "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)"))
    return;

  CUlaunchAttribute attributes[2] = {};
  attributes[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attributes[0].value.clusterDim.x = static_cast<unsigned>(clusterX);
  attributes[0].value.clusterDim.y = static_cast<unsigned>(clusterY);
  attributes[0].value.clusterDim.z = static_cast<unsigned>(clusterZ);
  attributes[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
  attributes[1].value.clusterSchedulingPolicyPreference =
      CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
  CUlaunchConfig config = {};
  config.gridDimX = static_cast<unsigned>(gridX);
  config.gridDimY = static_cast<unsigned>(gridY);
  config.gridDimZ = static_cast<unsigned>(gridZ);
  config.blockDimX = static_cast<unsigned>(blockX);
  config.blockDimY = static_cast<unsigned>(blockY);
  config.blockDimZ = static_cast<unsigned>(blockZ);
  config.sharedMemBytes = static_cast<unsigned>(smem);
  config.hStream = stream;
  config.attrs = attributes;
  config.numAttrs = 2;
  check(driver.cuLaunchKernelEx(&config, function, params, extra),
        "cuLaunchKernelEx");
}

/// A non-blocking stream; null on failure (later calls then use the legacy
/// default stream, which orders everything).
MGPU_API CUstream mgpuStreamCreate() {
  if (!enterGpu())
    return nullptr;
  CUstream stream = nullptr;
  if (!check(driver.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
             "cuStreamCreate"))
    return nullptr;
  return stream;
}

MGPU_API void mgpuStreamDestroy(CUstream stream) {
  if (!stream || !enterGpu())
    return;
  check(driver.cuStreamDestroy(stream), "cuStreamDestroy");
}

MGPU_API void mgpuStreamSynchronize(CUstream stream) {
  if (!enterGpu())
    return;
  check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize");
}

MGPU_API void mgpuStreamWaitEvent(CUstream stream, CUevent event) {
  if (!event || !enterGpu())
    return;
  check(driver.cuStreamWaitEvent(stream, event, /*Flags=*/0),
        "cuStreamWaitEvent");
}

MGPU_API CUevent mgpuEventCreate() {
  if (!enterGpu())
    return nullptr;
  CUevent event = nullptr;
  if (!check(driver.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING),
             "cuEventCreate"))
    return nullptr;
  return event;
}

MGPU_API void mgpuEventDestroy(CUevent event) {
  if (!event || !enterGpu())
    return;
  check(driver.cuEventDestroy(event), "cuEventDestroy");
}

MGPU_API void mgpuEventSynchronize(CUevent event) {
  if (!event || !enterGpu())
    return;
  check(driver.cuEventSynchronize(event), "cuEventSynchronize");
}

MGPU_API void mgpuEventRecord(CUevent event, CUstream stream) {
  if (!event || !enterGpu())
    return;
  check(driver.cuEventRecord(event, stream), "cuEventRecord");
}

/// gpu.alloc: device memory, stream-ordered on `stream` (cuMemAllocAsync,
/// from the device's memory pool: no implicit synchronization) or, without
/// a stream, cuMemAlloc. Returns null for 0 bytes and on
/// failure (error recorded; launches after a failure are skipped, so no
/// kernel reads through the null pointer). Managed memory (`host_shared`)
/// is refused: it can hang the GPU on some machines and vmoe does not emit
/// it. The flag is an i8 in the compiled code; it is taken as an int and
/// masked, so that bits above the byte, which the caller need not define,
/// are ignored.
MGPU_API void *mgpuMemAlloc(uint64_t sizeBytes, CUstream stream,
                            uint32_t isHostShared) {
  if (sizeBytes == 0 || !enterGpu())
    return nullptr;
  if ((isHostShared & 0xff) != 0) {
    recordError("mgpuMemAlloc: managed (host_shared) memory is not supported");
    return nullptr;
  }
  CUdeviceptr pointer = 0;
  char call[64];
  std::snprintf(call, sizeof(call), "%s(%llu bytes)",
                stream ? "cuMemAllocAsync" : "cuMemAlloc",
                static_cast<unsigned long long>(sizeBytes));
  CUresult result = stream ? driver.cuMemAllocAsync(&pointer, sizeBytes, stream)
                           : driver.cuMemAlloc(&pointer, sizeBytes);
  if (!check(result, call))
    return nullptr;
  return reinterpret_cast<void *>(pointer);
}

/// gpu.dealloc: stream-ordered on `stream` (cuMemFreeAsync, after the work
/// queued before it), else cuMemFree, which synchronizes with the device.
MGPU_API void mgpuMemFree(void *pointer, CUstream stream) {
  if (!pointer || !enterGpu())
    return;
  if (stream)
    check(driver.cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(pointer), stream),
          "cuMemFreeAsync");
  else
    check(driver.cuMemFree(reinterpret_cast<CUdeviceptr>(pointer)),
          "cuMemFree");
}

/// gpu.memcpy in any direction (unified addressing tells which).
MGPU_API void mgpuMemcpy(void *dst, void *src, size_t sizeBytes,
                         CUstream stream) {
  if (sizeBytes == 0 || !enterGpu() || anyError.load(std::memory_order_acquire))
    return;
  if (!dst || !src) {
    recordError("mgpuMemcpy: %zu bytes %s a null pointer", sizeBytes,
                dst ? "from" : "to");
    return;
  }
  check(driver.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                             reinterpret_cast<CUdeviceptr>(src), sizeBytes,
                             stream),
        "cuMemcpyAsync");
}

/// gpu.memset of 32-bit elements (the bit pattern of the value).
MGPU_API void mgpuMemset32(void *dst, uint32_t value, size_t count,
                           CUstream stream) {
  if (count == 0 || !enterGpu())
    return;
  check(driver.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(dst), value,
                                count, stream),
        "cuMemsetD32Async");
}

/// gpu.memset of 16-bit elements. The value is an i16 in the compiled code;
/// taken as an int and truncated, like the flag of mgpuMemAlloc.
MGPU_API void mgpuMemset16(void *dst, uint32_t value, size_t count,
                           CUstream stream) {
  if (count == 0 || !enterGpu())
    return;
  check(driver.cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(dst),
                                static_cast<unsigned short>(value & 0xffff),
                                count, stream),
        "cuMemsetD16Async");
}

/// Page-locks host memory so that the device can access it.
MGPU_API void mgpuMemHostRegister(void *pointer, uint64_t sizeBytes) {
  if (!pointer || sizeBytes == 0 || !enterGpu())
    return;
  check(driver.cuMemHostRegister(pointer, sizeBytes, /*Flags=*/0),
        "cuMemHostRegister");
}

/// gpu.host_register of a memref: `descriptor` is the ranked descriptor of
/// rank `rank` an unranked memref points to. Registers the bytes from the
/// first to the last element (a memref without elements is skipped).
MGPU_API void mgpuMemHostRegisterMemRef(int64_t rank, void *descriptor,
                                        int64_t elementSizeBytes) {
  char *begin = nullptr;
  uint64_t bytes = 0;
  if (!descriptor || rank < 0 || elementSizeBytes <= 0 ||
      !getMemRefSpan(rank, static_cast<const MemRefHead *>(descriptor),
                     elementSizeBytes, &begin, &bytes))
    return;
  mgpuMemHostRegister(begin, bytes);
}

MGPU_API void mgpuMemHostUnregister(void *pointer) {
  if (!pointer || !enterGpu())
    return;
  check(driver.cuMemHostUnregister(pointer), "cuMemHostUnregister");
}

/// gpu.host_unregister of a memref; the inverse of
/// mgpuMemHostRegisterMemRef.
MGPU_API void mgpuMemHostUnregisterMemRef(int64_t rank, void *descriptor,
                                          int64_t elementSizeBytes) {
  char *begin = nullptr;
  uint64_t bytes = 0;
  if (!descriptor || rank < 0 || elementSizeBytes <= 0 ||
      !getMemRefSpan(rank, static_cast<const MemRefHead *>(descriptor),
                     elementSizeBytes, &begin, &bytes))
    return;
  mgpuMemHostUnregister(begin);
}

/// gpu.set_default_device: the device of all later calls, in every thread.
MGPU_API void mgpuSetDefaultDevice(int32_t device) {
  defaultDevice.store(device, std::memory_order_relaxed);
}

//===----------------------------------------------------------------------===//
// The vmoe C API (vmoe_cuda_runtime.h)
//===----------------------------------------------------------------------===//

int vmoe_cuda_available(char *error, size_t errorSize) {
  if (bindContext() && !anyError.load(std::memory_order_acquire)) {
    if (error && errorSize > 0)
      error[0] = 0;
    return 0;
  }
  // A failed bindContext() recorded why, unless an earlier error did.
  takeError(error, errorSize);
  return 1;
}

int vmoe_cuda_last_error(char *error, size_t errorSize) {
  return takeError(error, errorSize);
}

int vmoe_cuda_synchronize(void) {
  if (enterGpu())
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize");
  return anyError.load(std::memory_order_acquire) ? 1 : 0;
}

void *vmoe_cuda_alloc(size_t bytes) {
  if (!enterGpu())
    return nullptr;
  CUdeviceptr pointer = 0;
  char call[64];
  std::snprintf(call, sizeof(call), "cuMemAlloc(%zu bytes)", bytes);
  if (!check(driver.cuMemAlloc(&pointer, bytes ? bytes : 1), call))
    return nullptr;
  return reinterpret_cast<void *>(pointer);
}

int vmoe_cuda_copy_to_device(void *device, const void *host, size_t bytes) {
  if (bytes == 0)
    return anyError.load(std::memory_order_acquire) ? 1 : 0;
  if (!device || !host) {
    recordError("vmoe_cuda_copy_to_device: %zu bytes %s a null pointer", bytes,
                device ? "from" : "to");
    return 1;
  }
  if (enterGpu())
    check(driver.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(device), host,
                              bytes),
          "cuMemcpyHtoD");
  return anyError.load(std::memory_order_acquire) ? 1 : 0;
}

int vmoe_cuda_copy_to_host(void *host, const void *device, size_t bytes) {
  if (bytes == 0)
    return anyError.load(std::memory_order_acquire) ? 1 : 0;
  if (!device || !host) {
    recordError("vmoe_cuda_copy_to_host: %zu bytes %s a null pointer", bytes,
                host ? "from" : "to");
    return 1;
  }
  if (enterGpu())
    check(driver.cuMemcpyDtoH(host, reinterpret_cast<CUdeviceptr>(device),
                              bytes),
          "cuMemcpyDtoH");
  return anyError.load(std::memory_order_acquire) ? 1 : 0;
}

void vmoe_cuda_free(void *pointer) {
  if (!pointer || !enterGpu())
    return;
  check(driver.cuMemFree(reinterpret_cast<CUdeviceptr>(pointer)), "cuMemFree");
}
