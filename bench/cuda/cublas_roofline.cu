//===- cublas_roofline.cu - cuBLAS time of the expert FLOPs of a MoE layer ===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The GPU counterpart of the sgemm roofline of bench/moe_layer_bench.py: the
// two expert GEMMs of one MoE layer on cuBLAS, timed with CUDA events, no
// routing, bias or activation. For E experts, G routing groups and B slots
// per expert and group:
//
//   Y[e] = X[e] W1[e]   [G*B x D] x [D x H]
//   Z[e] = Y[e] W2[e]   [G*B x H] x [H x D]
//
// i.e. E*G problems of B rows whose G groups share the expert's weights.
// They are timed two ways:
//   cublas_fp32 / cublas_tf32: cublasSgemmStridedBatched (FP32) and
//     cublasGemmStridedBatchedEx with CUBLAS_COMPUTE_32F_FAST_TF32, batch E,
//     G*B rows each: the groups of an expert are contiguous in the E x G x B
//     x D dispatch buffer, so they form one GEMM;
//   cublas_bf16: cublasGemmStridedBatchedEx on bf16 copies of the operands
//     (FP32 accumulation, Y kept in bf16), as cublas_fp32;
//   cublas_fp32_eg / cublas_tf32_eg (only for G > 1): cublasSgemmBatched /
//     cublasGemmBatchedEx, batch E*G of B rows, weight pointers repeated
//     per group.
// Every line on stdout is "# ..." (a comment) or "<name> <median ms>
// <GFLOP/s>", GFLOP counted as 4*E*G*B*D*H (two GEMMs over all slots).
// A few outputs are checked against a double-precision host computation.
//
// Build: nvcc -O3 -arch=sm_90 -lcublas cublas_roofline.cu -o cublas_roofline
//
//===----------------------------------------------------------------------===//

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

/// Exit status of a CUDA or cuBLAS failure (as bench/moe_layer_bench.py).
static constexpr int kToolFailure = 2;

#define CHECK_CUDA(call)                                                       \
  do {                                                                         \
    cudaError_t status = (call);                                               \
    if (status != cudaSuccess) {                                               \
      std::fprintf(stderr, "error: %s failed: %s\n", #call,                    \
                   cudaGetErrorString(status));                                \
      std::exit(kToolFailure);                                                 \
    }                                                                          \
  } while (0)

#define CHECK_CUBLAS(call)                                                     \
  do {                                                                         \
    cublasStatus_t status = (call);                                            \
    if (status != CUBLAS_STATUS_SUCCESS) {                                     \
      std::fprintf(stderr, "error: %s failed: %s\n", #call,                    \
                   cublasGetStatusString(status));                             \
      std::exit(kToolFailure);                                                 \
    }                                                                          \
  } while (0)

namespace {

/// Problem size and timing options.
struct Options {
  int d = 512;
  int h = 2048;
  int e = 32;
  int b = 26;
  int g = 1;
  int repeats = 20;
  int warmup = 3;
  bool tf32 = true;
};

/// The device buffers of one layer (row-major, as the compiled layer keeps
/// them): X [E, G*B, D], W1 [E, D, H], Y [E, G*B, H], W2 [E, H, D],
/// Z [E, G*B, D].
struct Buffers {
  float *x = nullptr, *w1 = nullptr, *y = nullptr, *w2 = nullptr;
  float *z = nullptr;
  /// Pointer arrays of the E*G batch: per problem i = e*G + g.
  const float **xs = nullptr, **w1s = nullptr, **w2s = nullptr;
  const float **ys = nullptr;
  float **yOut = nullptr, **zOut = nullptr;
  /// bf16 copies of X, W1, W2 and the bf16 Y of the bf16 variant.
  __nv_bfloat16 *xh = nullptr, *w1h = nullptr, *w2h = nullptr, *yh = nullptr;
};

/// Which cuBLAS call runs the two GEMMs.
enum class Variant {
  StridedFP32,
  StridedTF32,
  StridedBF16,
  PointersFP32,
  PointersTF32
};

} // namespace

static void usage(const char *program) {
  std::fprintf(stderr,
               "usage: %s [--size s32-g1|s32-g4|b-g1] [--D n] [--H n] "
               "[--E n] [--B n] [--G n] [--repeats n] [--warmup n] "
               "[--tf32 0|1]\n",
               program);
  std::exit(kToolFailure);
}

/// Parses "--name value" and "--name=value"; sizes are positive.
static Options parseOptions(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    size_t equal = arg.find('=');
    if (equal != std::string::npos) {
      value = arg.substr(equal + 1);
      arg = arg.substr(0, equal);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      usage(argv[0]);
    }
    if (arg == "--size") {
      // V-MoE-S/32: 8 images of 50 tokens, k = 2, C = 1.05:
      // B = round(2 * 400 * 1.05 / 32) = 26. B-size: B = 105 with E = 8.
      if (value == "s32-g1" || value == "s32-g4") {
        options.d = 512, options.h = 2048, options.e = 32, options.b = 26;
        options.g = value == "s32-g4" ? 4 : 1;
      } else if (value == "b-g1") {
        options.d = 768, options.h = 3072, options.e = 8, options.b = 105;
        options.g = 1;
      } else {
        usage(argv[0]);
      }
      continue;
    }
    char *end = nullptr;
    long number = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end || number < 0 || number > (1L << 20))
      usage(argv[0]);
    int parsed = static_cast<int>(number);
    if (arg == "--D")
      options.d = parsed;
    else if (arg == "--H")
      options.h = parsed;
    else if (arg == "--E")
      options.e = parsed;
    else if (arg == "--B")
      options.b = parsed;
    else if (arg == "--G")
      options.g = parsed;
    else if (arg == "--repeats")
      options.repeats = parsed;
    else if (arg == "--warmup")
      options.warmup = parsed;
    else if (arg == "--tf32")
      options.tf32 = parsed != 0;
    else
      usage(argv[0]);
  }
  if (options.d < 1 || options.h < 1 || options.e < 1 || options.b < 1 ||
      options.g < 1 || options.repeats < 1)
    usage(argv[0]);
  return options;
}

/// Fills `data` with a deterministic pattern in [-scale, scale).
__global__ void fillKernel(float *data, size_t count, unsigned seed,
                           float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned v = static_cast<unsigned>(i) * 2654435761u + seed * 40503u;
    v ^= v >> 16;
    v *= 2246822519u;
    v ^= v >> 13;
    data[i] = scale * (static_cast<float>(v & 0xffffff) / 8388608.0f - 1.0f);
  }
}

/// Rounds `count` floats to bf16 (to nearest even), or back to float.
__global__ void toBF16Kernel(const float *in, __nv_bfloat16 *out,
                             size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(in[i]);
}
__global__ void fromBF16Kernel(const __nv_bfloat16 *in, float *out,
                               size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = __bfloat162float(in[i]);
}

/// A bf16 copy of `count` floats.
static __nv_bfloat16 *toBF16(const float *data, size_t count) {
  __nv_bfloat16 *copy = nullptr;
  CHECK_CUDA(cudaMalloc(&copy, count * sizeof(__nv_bfloat16)));
  toBF16Kernel<<<1024, 256>>>(data, copy, count);
  CHECK_CUDA(cudaGetLastError());
  return copy;
}

static float *allocate(size_t count, unsigned seed, float scale) {
  float *data = nullptr;
  CHECK_CUDA(cudaMalloc(&data, count * sizeof(float)));
  fillKernel<<<1024, 256>>>(data, count, seed, scale);
  CHECK_CUDA(cudaGetLastError());
  return data;
}

/// Copies a host array of pointers to the device.
template <typename T> static T **devicePointers(const std::vector<T *> &host) {
  T **device = nullptr;
  CHECK_CUDA(cudaMalloc(&device, host.size() * sizeof(T *)));
  CHECK_CUDA(cudaMemcpy(device, host.data(), host.size() * sizeof(T *),
                        cudaMemcpyHostToDevice));
  return device;
}

static Buffers allocateBuffers(const Options &o) {
  size_t rows = size_t(o.g) * o.b;
  Buffers buffers;
  // Inputs ~ U(-1, 1), weights ~ U(-1, 1) / sqrt(fan_in): outputs of order 1.
  buffers.x = allocate(size_t(o.e) * rows * o.d, 1, 1.0f);
  buffers.w1 = allocate(size_t(o.e) * o.d * o.h, 2, 1.0f / std::sqrt(o.d));
  buffers.w2 = allocate(size_t(o.e) * o.h * o.d, 3, 1.0f / std::sqrt(o.h));
  CHECK_CUDA(cudaMalloc(&buffers.y, size_t(o.e) * rows * o.h * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&buffers.z, size_t(o.e) * rows * o.d * sizeof(float)));
  buffers.xh = toBF16(buffers.x, size_t(o.e) * rows * o.d);
  buffers.w1h = toBF16(buffers.w1, size_t(o.e) * o.d * o.h);
  buffers.w2h = toBF16(buffers.w2, size_t(o.e) * o.h * o.d);
  CHECK_CUDA(cudaMalloc(&buffers.yh, size_t(o.e) * rows * o.h * 2));

  std::vector<const float *> xs, w1s, w2s, ys;
  std::vector<float *> yOut, zOut;
  for (int e = 0; e < o.e; ++e) {
    for (int g = 0; g < o.g; ++g) {
      size_t row = size_t(e) * rows + size_t(g) * o.b;
      xs.push_back(buffers.x + row * o.d);
      ys.push_back(buffers.y + row * o.h);
      yOut.push_back(buffers.y + row * o.h);
      zOut.push_back(buffers.z + row * o.d);
      w1s.push_back(buffers.w1 + size_t(e) * o.d * o.h);
      w2s.push_back(buffers.w2 + size_t(e) * o.h * o.d);
    }
  }
  buffers.xs = devicePointers(xs);
  buffers.w1s = devicePointers(w1s);
  buffers.w2s = devicePointers(w2s);
  buffers.ys = devicePointers(ys);
  buffers.yOut = devicePointers(yOut);
  buffers.zOut = devicePointers(zOut);
  CHECK_CUDA(cudaDeviceSynchronize());
  return buffers;
}

/// Runs both GEMMs once. cuBLAS is column-major: a row-major [R x C] matrix
/// is its column-major transpose with leading dimension C, so Y = X W1 is
/// computed as Y^T = W1^T X^T (m = H, n = rows, k = D), likewise Z.
static void runLayer(cublasHandle_t handle, const Options &o,
                     const Buffers &buf, Variant variant) {
  const float one = 1.0f, zero = 0.0f;
  const int rows = o.g * o.b;
  const cublasOperation_t n = CUBLAS_OP_N;
  switch (variant) {
  case Variant::StridedFP32:
    CHECK_CUBLAS(cublasSgemmStridedBatched(
        handle, n, n, o.h, rows, o.d, &one, buf.w1, o.h, (long long)o.d * o.h,
        buf.x, o.d, (long long)rows * o.d, &zero, buf.y, o.h,
        (long long)rows * o.h, o.e));
    CHECK_CUBLAS(cublasSgemmStridedBatched(
        handle, n, n, o.d, rows, o.h, &one, buf.w2, o.d, (long long)o.h * o.d,
        buf.y, o.h, (long long)rows * o.h, &zero, buf.z, o.d,
        (long long)rows * o.d, o.e));
    return;
  case Variant::StridedTF32:
    CHECK_CUBLAS(cublasGemmStridedBatchedEx(
        handle, n, n, o.h, rows, o.d, &one, buf.w1, CUDA_R_32F, o.h,
        (long long)o.d * o.h, buf.x, CUDA_R_32F, o.d, (long long)rows * o.d,
        &zero, buf.y, CUDA_R_32F, o.h, (long long)rows * o.h, o.e,
        CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    CHECK_CUBLAS(cublasGemmStridedBatchedEx(
        handle, n, n, o.d, rows, o.h, &one, buf.w2, CUDA_R_32F, o.d,
        (long long)o.h * o.d, buf.y, CUDA_R_32F, o.h, (long long)rows * o.h,
        &zero, buf.z, CUDA_R_32F, o.d, (long long)rows * o.d, o.e,
        CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    return;
  case Variant::StridedBF16:
    // bf16 operands, FP32 accumulation; Y is stored as bf16 (the operand of
    // the second GEMM), Z as FP32.
    CHECK_CUBLAS(cublasGemmStridedBatchedEx(
        handle, n, n, o.h, rows, o.d, &one, buf.w1h, CUDA_R_16BF, o.h,
        (long long)o.d * o.h, buf.xh, CUDA_R_16BF, o.d, (long long)rows * o.d,
        &zero, buf.yh, CUDA_R_16BF, o.h, (long long)rows * o.h, o.e,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    CHECK_CUBLAS(cublasGemmStridedBatchedEx(
        handle, n, n, o.d, rows, o.h, &one, buf.w2h, CUDA_R_16BF, o.d,
        (long long)o.h * o.d, buf.yh, CUDA_R_16BF, o.h, (long long)rows * o.h,
        &zero, buf.z, CUDA_R_32F, o.d, (long long)rows * o.d, o.e,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  case Variant::PointersFP32:
    CHECK_CUBLAS(cublasSgemmBatched(handle, n, n, o.h, o.b, o.d, &one,
                                    buf.w1s, o.h, buf.xs, o.d, &zero, buf.yOut,
                                    o.h, o.e * o.g));
    CHECK_CUBLAS(cublasSgemmBatched(handle, n, n, o.d, o.b, o.h, &one,
                                    buf.w2s, o.d, buf.ys, o.h, &zero, buf.zOut,
                                    o.d, o.e * o.g));
    return;
  case Variant::PointersTF32:
    CHECK_CUBLAS(cublasGemmBatchedEx(
        handle, n, n, o.h, o.b, o.d, &one,
        reinterpret_cast<const void *const *>(buf.w1s), CUDA_R_32F, o.h,
        reinterpret_cast<const void *const *>(buf.xs), CUDA_R_32F, o.d, &zero,
        reinterpret_cast<void *const *>(buf.yOut), CUDA_R_32F, o.h,
        o.e * o.g, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    CHECK_CUBLAS(cublasGemmBatchedEx(
        handle, n, n, o.d, o.b, o.h, &one,
        reinterpret_cast<const void *const *>(buf.w2s), CUDA_R_32F, o.d,
        reinterpret_cast<const void *const *>(buf.ys), CUDA_R_32F, o.h, &zero,
        reinterpret_cast<void *const *>(buf.zOut), CUDA_R_32F, o.d,
        o.e * o.g, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    return;
  }
}

/// Largest relative error of sampled Y and Z entries against double
/// precision on the host, |a - b| / (|b| + 0.1 max|b|) as check_layers.
static double checkOutputs(const Options &o, const Buffers &buf) {
  size_t rows = size_t(o.g) * o.b;
  std::vector<float> x(size_t(o.e) * rows * o.d), w1(size_t(o.e) * o.d * o.h),
      w2(size_t(o.e) * o.h * o.d), y(size_t(o.e) * rows * o.h),
      z(size_t(o.e) * rows * o.d);
  CHECK_CUDA(cudaMemcpy(x.data(), buf.x, x.size() * 4, cudaMemcpyDefault));
  CHECK_CUDA(cudaMemcpy(w1.data(), buf.w1, w1.size() * 4, cudaMemcpyDefault));
  CHECK_CUDA(cudaMemcpy(w2.data(), buf.w2, w2.size() * 4, cudaMemcpyDefault));
  CHECK_CUDA(cudaMemcpy(y.data(), buf.y, y.size() * 4, cudaMemcpyDefault));
  CHECK_CUDA(cudaMemcpy(z.data(), buf.z, z.size() * 4, cudaMemcpyDefault));

  // Samples: first and last expert, first and last row, a few columns.
  struct Sample {
    size_t e, r, c;
    double expectedY, expectedZ;
  };
  std::vector<Sample> samples;
  for (size_t e : {size_t(0), size_t(o.e - 1)})
    for (size_t r : {size_t(0), rows - 1})
      for (size_t c : {size_t(0), size_t(o.d / 2), size_t(o.d - 1)})
        samples.push_back({e, r, c, 0, 0});
  double maxY = 0, maxZ = 0;
  for (Sample &s : samples) {
    // Y[e][r][c'] for c' = c mod H, and Z[e][r][c] from the device's Y
    // (so that the two checks are independent).
    size_t cy = s.c % o.h;
    for (int k = 0; k < o.d; ++k)
      s.expectedY += double(x[(s.e * rows + s.r) * o.d + k]) *
                     w1[(s.e * o.d + k) * o.h + cy];
    for (int k = 0; k < o.h; ++k)
      s.expectedZ += double(y[(s.e * rows + s.r) * o.h + k]) *
                     w2[(s.e * o.h + k) * o.d + s.c];
    maxY = std::max(maxY, std::fabs(s.expectedY));
    maxZ = std::max(maxZ, std::fabs(s.expectedZ));
  }
  double worst = 0;
  for (const Sample &s : samples) {
    double gotY = y[(s.e * rows + s.r) * o.h + s.c % o.h];
    double gotZ = z[(s.e * rows + s.r) * o.d + s.c];
    worst = std::max(worst, std::fabs(gotY - s.expectedY) /
                                (std::fabs(s.expectedY) + 0.1 * maxY));
    worst = std::max(worst, std::fabs(gotZ - s.expectedZ) /
                                (std::fabs(s.expectedZ) + 0.1 * maxZ));
  }
  return worst;
}

/// Times `repeats` runs after `warmup` untimed ones; returns the median in
/// milliseconds and checks the outputs of the last run.
static double timeVariant(cublasHandle_t handle, const Options &o,
                          const Buffers &buf, Variant variant,
                          double *relativeError) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < o.warmup; ++i)
    runLayer(handle, o, buf, variant);
  std::vector<float> times;
  for (int i = 0; i < o.repeats; ++i) {
    CHECK_CUDA(cudaEventRecord(start));
    runLayer(handle, o, buf, variant);
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  // The checks read the FP32 Y.
  if (variant == Variant::StridedBF16) {
    fromBF16Kernel<<<1024, 256>>>(buf.yh, buf.y,
                                  size_t(o.e) * o.g * o.b * o.h);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
  }
  std::sort(times.begin(), times.end());
  size_t middle = times.size() / 2;
  double median = times.size() % 2 ? times[middle]
                                   : 0.5 * (times[middle - 1] + times[middle]);
  *relativeError = checkOutputs(o, buf);
  return median;
}

int main(int argc, char **argv) {
  Options o = parseOptions(argc, argv);
  int device = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  cudaDeviceProp properties;
  CHECK_CUDA(cudaGetDeviceProperties(&properties, device));
  double gflop = 4.0 * o.e * o.g * o.b * double(o.d) * o.h / 1e9;
  std::printf("# cublas_roofline D=%d H=%d E=%d B=%d G=%d GFLOP=%.4f "
              "repeats=%d warmup=%d device=%s sm_%d%d\n",
              o.d, o.h, o.e, o.b, o.g, gflop, o.repeats, o.warmup,
              properties.name, properties.major, properties.minor);

  cublasHandle_t handle;
  CHECK_CUBLAS(cublasCreate(&handle));
  Buffers buffers = allocateBuffers(o);

  struct Row {
    const char *name;
    Variant variant;
    bool tf32;
  };
  std::vector<Row> rows = {{"cublas_fp32", Variant::StridedFP32, false},
                           {"cublas_tf32", Variant::StridedTF32, true},
                           {"cublas_bf16", Variant::StridedBF16, true}};
  if (o.g > 1) {
    rows.push_back({"cublas_fp32_eg", Variant::PointersFP32, false});
    rows.push_back({"cublas_tf32_eg", Variant::PointersTF32, true});
  }
  int status = 0;
  for (const Row &row : rows) {
    if (row.tf32 && !o.tf32)
      continue;
    double error = 0;
    double ms = timeVariant(handle, o, buffers, row.variant, &error);
    std::printf("%s %.4f %.1f\n", row.name, ms, gflop / (ms * 1e-3));
    // TF32 keeps 10 mantissa bits (about 1e-3 relative per product), bf16
    // 7 (about 4e-3, and Y is rounded to bf16 once more).
    double tolerance = row.variant == Variant::StridedBF16 ? 5e-2
                       : row.tf32                          ? 2e-2
                                                           : 1e-4;
    std::printf("# %s max_rel_err=%.2e (tolerance %.0e)\n", row.name, error,
                tolerance);
    if (!(error <= tolerance)) {
      std::fprintf(stderr, "error: %s: outputs differ from the host by %.2e\n",
                   row.name, error);
      status = 1;
    }
  }
  std::fflush(stdout);

  for (void *pointer :
       {(void *)buffers.x, (void *)buffers.w1, (void *)buffers.y,
        (void *)buffers.w2, (void *)buffers.z, (void *)buffers.xs,
        (void *)buffers.w1s, (void *)buffers.w2s, (void *)buffers.ys,
        (void *)buffers.yOut, (void *)buffers.zOut, (void *)buffers.xh,
        (void *)buffers.w1h, (void *)buffers.w2h, (void *)buffers.yh})
    CHECK_CUDA(cudaFree(pointer));
  CHECK_CUBLAS(cublasDestroy(handle));
  return status;
}
