/*===- fake_cuda_driver.c - Test double of libcuda.so.1 -----------*- C -*-===*\
|*                                                                            *|
|* Part of the vmoe project, under the Apache License v2.0 with LLVM          *|
|* Exceptions.                                                                *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* TEST DOUBLE, used only by test/Runtime/CUDA: a CUDA driver on the host,    *|
|* loaded by vmoe_cuda_runtime through VMOE_CUDA_DRIVER, so that the runtime  *|
|* and the mgpu calls of compiled code can be checked on a machine without a  *|
|* GPU. It defines exactly the driver functions the runtime resolves (with    *|
|* cuda.h's versioned names) and:                                             *|
|* - keeps "device" memory in host memory, so copies, memsets and managed     *|
|*   memory are real; tracks allocations and rejects unknown frees;           *|
|* - requires a current context in the calling thread for every call that     *|
|*   needs one (CUDA_ERROR_INVALID_CONTEXT otherwise);                        *|
|* - loads cubins (ELF), fatbins and PTX by their magic only;                 *|
|* - emulates two kernels whose arguments are the five fields of a           *|
|*   memref<?xf32> descriptor, over the x dimension of the grid:             *|
|*   "scale_kernel" a[i] *= 2 and "add_one" a[i] += 1; other kernels are      *|
|*   no-ops.                                                                  *|
|* Environment: FAKE_CUDA_TRACE=1 prints every call as "fake-cuda: ..." on    *|
|* stderr; FAKE_CUDA_DEVICES=<n> sets the device count (default 1, 0 makes    *|
|* cuInit fail like a machine without GPU); FAKE_CUDA_FAIL=<function> makes   *|
|* that function (unversioned name) fail with a typical error;              *|
|* FAKE_CUDA_DEINIT_AT_EXIT=1 shuts the driver down in an atexit handler     *|
|* (as the real one does): later calls fail with CUDA_ERROR_DEINITIALIZED   *|
|* and cuGetErrorString describes nothing.                                  *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include <cuda.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

struct CUctx_st {
  int device;
};
struct CUmod_st {
  int id;
};
struct CUfunc_st {
  char name[64];
};
struct CUstream_st {
  int id;
};
struct CUevent_st {
  int id;
};

enum { kMaxDevices = 8, kMaxAllocations = 1024, kMaxFunctions = 16 };

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static int deinitialized;
static int deviceCount = 1;
static struct CUctx_st contexts[kMaxDevices];
static _Thread_local CUcontext current;
static int nextId = 1;
static void *allocations[kMaxAllocations];
static struct CUfunc_st functions[kMaxFunctions];

static void trace(const char *format, ...) {
  const char *enabled = getenv("FAKE_CUDA_TRACE");
  if (!enabled || strcmp(enabled, "1") != 0)
    return;
  va_list args;
  va_start(args, format);
  pthread_mutex_lock(&mutex);
  fprintf(stderr, "fake-cuda: ");
  vfprintf(stderr, format, args);
  fprintf(stderr, "\n");
  pthread_mutex_unlock(&mutex);
  va_end(args);
}

/// `code` when FAKE_CUDA_FAIL names `function`, else CUDA_SUCCESS.
static CUresult injected(const char *function, CUresult code) {
  const char *name = getenv("FAKE_CUDA_FAIL");
  if (name && strcmp(name, function) == 0) {
    trace("%s: injected failure %d", function, (int)code);
    return code;
  }
  return CUDA_SUCCESS;
}

/// CUDA_SUCCESS when initialized and a context is current in this thread.
static CUresult needContext(const char *function) {
  if (deinitialized)
    return CUDA_ERROR_DEINITIALIZED;
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!current) {
    trace("%s: no current context in this thread", function);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return CUDA_SUCCESS;
}

static int newId(void) {
  pthread_mutex_lock(&mutex);
  int id = nextId++;
  pthread_mutex_unlock(&mutex);
  return id;
}

static CUresult track(void *pointer) {
  pthread_mutex_lock(&mutex);
  for (int i = 0; i < kMaxAllocations; ++i) {
    if (!allocations[i]) {
      allocations[i] = pointer;
      pthread_mutex_unlock(&mutex);
      return CUDA_SUCCESS;
    }
  }
  pthread_mutex_unlock(&mutex);
  free(pointer);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

static int untrack(void *pointer) {
  pthread_mutex_lock(&mutex);
  for (int i = 0; i < kMaxAllocations; ++i) {
    if (allocations[i] == pointer) {
      allocations[i] = NULL;
      pthread_mutex_unlock(&mutex);
      return 1;
    }
  }
  pthread_mutex_unlock(&mutex);
  return 0;
}

static CUresult allocate(CUdeviceptr *pointer, size_t bytes) {
  if (!pointer || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  void *memory = aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!memory)
    return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult result = track(memory);
  if (result == CUDA_SUCCESS)
    *pointer = (CUdeviceptr)memory;
  return result;
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **text) {
  if (deinitialized) {
    *text = NULL;
    return CUDA_ERROR_DEINITIALIZED;
  }
  switch (error) {
  case CUDA_SUCCESS:
    *text = "no error";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_VALUE:
    *text = "invalid argument";
    return CUDA_SUCCESS;
  case CUDA_ERROR_OUT_OF_MEMORY:
    *text = "out of memory";
    return CUDA_SUCCESS;
  case CUDA_ERROR_NOT_INITIALIZED:
    *text = "initialization error";
    return CUDA_SUCCESS;
  case CUDA_ERROR_NO_DEVICE:
    *text = "no CUDA-capable device is detected";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_IMAGE:
    *text = "device kernel image is invalid";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_CONTEXT:
    *text = "invalid device context";
    return CUDA_SUCCESS;
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
    *text = "no kernel image is available for execution on the device";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_HANDLE:
    *text = "invalid resource handle";
    return CUDA_SUCCESS;
  case CUDA_ERROR_NOT_FOUND:
    *text = "named symbol not found";
    return CUDA_SUCCESS;
  case CUDA_ERROR_ILLEGAL_ADDRESS:
    *text = "an illegal memory access was encountered";
    return CUDA_SUCCESS;
  default:
    *text = NULL;
    return CUDA_ERROR_INVALID_VALUE;
  }
}

static void deinitialize(void) {
  trace("driver shut down at exit");
  deinitialized = 1;
}

EXPORT CUresult cuInit(unsigned flags) {
  const char *deinit = getenv("FAKE_CUDA_DEINIT_AT_EXIT");
  if (deinit && strcmp(deinit, "1") == 0)
    atexit(deinitialize);
  const char *devices = getenv("FAKE_CUDA_DEVICES");
  deviceCount = devices ? atoi(devices) : 1;
  if (deviceCount > kMaxDevices)
    deviceCount = kMaxDevices;
  trace("cuInit flags %u, %d devices", flags, deviceCount);
  if (deviceCount < 1)
    return CUDA_ERROR_NO_DEVICE;
  initialized = 1;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count) {
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  *count = deviceCount;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  trace("cuDeviceGet %d", ordinal);
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= deviceCount)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  trace("cuDevicePrimaryCtxRetain device %d", device);
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  contexts[device].device = device;
  *context = &contexts[device];
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *context) {
  if (deinitialized)
    return CUDA_ERROR_DEINITIALIZED;
  *context = current;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext context) {
  trace("cuCtxSetCurrent device %d", context ? context->device : -1);
  current = context;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void) {
  CUresult result = needContext("cuCtxSynchronize");
  if (result == CUDA_SUCCESS)
    result = injected("cuCtxSynchronize", CUDA_ERROR_ILLEGAL_ADDRESS);
  trace("cuCtxSynchronize");
  return result;
}

static const char *imageKind(const void *image) {
  const unsigned char *bytes = image;
  if (!bytes)
    return NULL;
  if (memcmp(bytes, "\177ELF", 4) == 0)
    return "cubin";
  if (bytes[0] == 0x50 && bytes[1] == 0xed && bytes[2] == 0x55 &&
      bytes[3] == 0xba)
    return "fatbin";
  if (strstr((const char *)bytes, ".version") &&
      strstr((const char *)bytes, ".target"))
    return "ptx";
  return NULL;
}

static CUresult loadModule(CUmodule *module, const void *image,
                           const char *function) {
  CUresult result = needContext(function);
  if (result != CUDA_SUCCESS)
    return result;
  if ((result = injected(function, CUDA_ERROR_NO_BINARY_FOR_GPU)))
    return result;
  const char *kind = imageKind(image);
  if (!kind)
    return CUDA_ERROR_INVALID_IMAGE;
  struct CUmod_st *loaded = malloc(sizeof(*loaded));
  loaded->id = newId();
  *module = loaded;
  trace("%s %s -> module %d", function, kind, loaded->id);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  return loadModule(module, image, "cuModuleLoadData");
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                                   unsigned numOptions, CUjit_option *options,
                                   void **values) {
  for (unsigned i = 0; i < numOptions; ++i) {
    if (options[i] == CU_JIT_OPTIMIZATION_LEVEL)
      trace("cuModuleLoadDataEx option optimization level %u",
            (unsigned)(uintptr_t)values[i]);
    else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      trace("cuModuleLoadDataEx option error log of %u bytes",
            (unsigned)(uintptr_t)values[i]);
  }
  return loadModule(module, image, "cuModuleLoadDataEx");
}

EXPORT CUresult cuModuleUnload(CUmodule module) {
  CUresult result = needContext("cuModuleUnload");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuModuleUnload module %d", module->id);
  free(module);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *function, CUmodule module,
                                    const char *name) {
  CUresult result = needContext("cuModuleGetFunction");
  if (result != CUDA_SUCCESS)
    return result;
  if (!module || !name || strlen(name) >= sizeof((*function)->name))
    return CUDA_ERROR_INVALID_VALUE;
  trace("cuModuleGetFunction module %d %s", module->id, name);
  if ((result = injected("cuModuleGetFunction", CUDA_ERROR_NOT_FOUND)))
    return result;
  // One handle per name, as the driver keeps one per kernel.
  pthread_mutex_lock(&mutex);
  struct CUfunc_st *found = NULL;
  for (int i = 0; i < kMaxFunctions && !found; ++i) {
    if (!functions[i].name[0])
      strcpy(functions[i].name, name);
    if (strcmp(functions[i].name, name) == 0)
      found = &functions[i];
  }
  pthread_mutex_unlock(&mutex);
  if (!found)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *function = found;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncSetAttribute(CUfunction function,
                                   CUfunction_attribute attribute, int value) {
  CUresult result = needContext("cuFuncSetAttribute");
  if (result != CUDA_SUCCESS)
    return result;
  const char *name =
      attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
          ? "MAX_DYNAMIC_SHARED_SIZE_BYTES"
      : attribute == CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
          ? "NON_PORTABLE_CLUSTER_SIZE_ALLOWED"
          : "other";
  trace("cuFuncSetAttribute %s %s %d", function->name, name, value);
  return CUDA_SUCCESS;
}

/// Runs the emulated kernels over the x dimension of the grid.
static void emulate(CUfunction function, unsigned threads, void **params) {
  // params[1] points to the aligned pointer of the memref descriptor.
  float *data = params ? *(float **)params[1] : NULL;
  if (!data)
    return;
  if (strcmp(function->name, "scale_kernel") == 0)
    for (unsigned i = 0; i < threads; ++i)
      data[i] *= 2;
  else if (strcmp(function->name, "add_one") == 0)
    for (unsigned i = 0; i < threads; ++i)
      data[i] += 1;
}

static int streamId(CUstream stream) { return stream ? stream->id : 0; }

EXPORT CUresult cuLaunchKernel(CUfunction function, unsigned gridX,
                               unsigned gridY, unsigned gridZ, unsigned blockX,
                               unsigned blockY, unsigned blockZ,
                               unsigned sharedMemory, CUstream stream,
                               void **params, void **extra) {
  CUresult result = needContext("cuLaunchKernel");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuLaunchKernel %s grid %u %u %u block %u %u %u smem %u stream %d%s",
        function->name, gridX, gridY, gridZ, blockX, blockY, blockZ,
        sharedMemory, streamId(stream), extra ? " extra" : "");
  if ((result = injected("cuLaunchKernel", CUDA_ERROR_INVALID_VALUE)))
    return result;
  emulate(function, gridX * blockX, params);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config,
                                 CUfunction function, void **params,
                                 void **extra) {
  CUresult result = needContext("cuLaunchKernelEx");
  if (result != CUDA_SUCCESS)
    return result;
  unsigned cluster[3] = {0, 0, 0};
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      cluster[0] = config->attrs[i].value.clusterDim.x;
      cluster[1] = config->attrs[i].value.clusterDim.y;
      cluster[2] = config->attrs[i].value.clusterDim.z;
    }
  }
  trace("cuLaunchKernelEx %s cluster %u %u %u grid %u %u %u block %u %u %u "
        "smem %u stream %d%s",
        function->name, cluster[0], cluster[1], cluster[2], config->gridDimX,
        config->gridDimY, config->gridDimZ, config->blockDimX,
        config->blockDimY, config->blockDimZ, config->sharedMemBytes,
        streamId(config->hStream), extra ? " extra" : "");
  emulate(function, config->gridDimX * config->blockDimX, params);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned flags) {
  CUresult result = needContext("cuStreamCreate");
  if (result != CUDA_SUCCESS)
    return result;
  struct CUstream_st *created = malloc(sizeof(*created));
  created->id = newId();
  *stream = created;
  trace("cuStreamCreate -> stream %d%s", created->id,
        flags == CU_STREAM_NON_BLOCKING ? " non-blocking" : "");
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy(CUstream stream) {
  CUresult result = needContext("cuStreamDestroy");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuStreamDestroy stream %d", streamId(stream));
  free(stream);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  CUresult result = needContext("cuStreamSynchronize");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuStreamSynchronize stream %d", streamId(stream));
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event,
                                  unsigned flags) {
  CUresult result = needContext("cuStreamWaitEvent");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuStreamWaitEvent stream %d event %d flags %u", streamId(stream),
        event->id, flags);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventCreate(CUevent *event, unsigned flags) {
  CUresult result = needContext("cuEventCreate");
  if (result != CUDA_SUCCESS)
    return result;
  struct CUevent_st *created = malloc(sizeof(*created));
  created->id = newId();
  *event = created;
  trace("cuEventCreate -> event %d%s", created->id,
        flags == CU_EVENT_DISABLE_TIMING ? " without timing" : "");
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy(CUevent event) {
  CUresult result = needContext("cuEventDestroy");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuEventDestroy event %d", event->id);
  free(event);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) {
  CUresult result = needContext("cuEventRecord");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuEventRecord event %d stream %d", event->id, streamId(stream));
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventSynchronize(CUevent event) {
  CUresult result = needContext("cuEventSynchronize");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuEventSynchronize event %d", event->id);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAlloc(CUdeviceptr *pointer, size_t bytes) {
  CUresult result = needContext("cuMemAlloc");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuMemAlloc %zu bytes", bytes);
  if ((result = injected("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY)))
    return result;
  return allocate(pointer, bytes);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *pointer, size_t bytes,
                                  unsigned flags) {
  CUresult result = needContext("cuMemAllocManaged");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuMemAllocManaged %zu bytes%s", bytes,
        flags == CU_MEM_ATTACH_GLOBAL ? " global" : "");
  if ((result = injected("cuMemAllocManaged", CUDA_ERROR_OUT_OF_MEMORY)))
    return result;
  return allocate(pointer, bytes);
}

EXPORT CUresult cuMemFree(CUdeviceptr pointer) {
  CUresult result = needContext("cuMemFree");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuMemFree");
  if (!untrack((void *)pointer))
    return CUDA_ERROR_INVALID_VALUE;
  free((void *)pointer);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *pointer, size_t bytes,
                                CUstream stream) {
  CUresult result = needContext("cuMemAllocAsync");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuMemAllocAsync %zu bytes stream %d", bytes, streamId(stream));
  if ((result = injected("cuMemAllocAsync", CUDA_ERROR_OUT_OF_MEMORY)))
    return result;
  return allocate(pointer, bytes);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  CUresult result = needContext("cuMemFreeAsync");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuMemFreeAsync stream %d", streamId(stream));
  if (!untrack((void *)pointer))
    return CUDA_ERROR_INVALID_VALUE;
  free((void *)pointer);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes) {
  CUresult result = needContext("cuMemcpyHtoD");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuMemcpyHtoD %zu bytes", bytes);
  if ((result = injected("cuMemcpyHtoD", CUDA_ERROR_INVALID_VALUE)))
    return result;
  memcpy((void *)dst, src, bytes);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes) {
  CUresult result = needContext("cuMemcpyDtoH");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuMemcpyDtoH %zu bytes", bytes);
  memcpy(dst, (const void *)src, bytes);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                              CUstream stream) {
  CUresult result = needContext("cuMemcpyAsync");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuMemcpyAsync %zu bytes stream %d", bytes, streamId(stream));
  memcpy((void *)dst, (const void *)src, bytes);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned value, size_t count,
                                 CUstream stream) {
  CUresult result = needContext("cuMemsetD32Async");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuMemsetD32Async 0x%08x x %zu stream %d", value, count,
        streamId(stream));
  for (size_t i = 0; i < count; ++i)
    ((uint32_t *)dst)[i] = value;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short value,
                                 size_t count, CUstream stream) {
  CUresult result = needContext("cuMemsetD16Async");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuMemsetD16Async 0x%04x x %zu stream %d", value, count,
        streamId(stream));
  for (size_t i = 0; i < count; ++i)
    ((uint16_t *)dst)[i] = value;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostRegister(void *pointer, size_t bytes,
                                  unsigned flags) {
  CUresult result = needContext("cuMemHostRegister");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuMemHostRegister %zu bytes at %p flags %u", bytes, pointer, flags);
  return pointer ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemHostUnregister(void *pointer) {
  CUresult result = needContext("cuMemHostUnregister");
  if (result != CUDA_SUCCESS)
    return result;
  trace("cuMemHostUnregister %p", pointer);
  return pointer ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
