//===- BF16KernelChoice.cpp - bf16 or f32 kernels for a CPU -----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Target/BF16KernelChoice.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

using namespace mlir::vmoe;

// bf16 kernels where their products run at least this much faster than f32
// fma: the bytes they save do not pay for the conversions at 1x (the issue
// 23 Xeon: 0.79-0.86x of f32), and at 2x (Zen 4) the whole model gains
// 1.5-1.75x.
static constexpr double kMinSpeedup = 1.5;

#if defined(__x86_64__)
namespace {
constexpr int kIterations = 200000;

using Clock = std::chrono::steady_clock;

template <typename Body> double seconds(Body body) {
  auto start = Clock::now();
  body();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One probe: 12 independent accumulators (enough to fill two fma pipes of
// latency 4-6) each updated kIterations times by STEP, summed into the
// first lane so that nothing is optimized away.
#define VMOE_PROBE(NAME, FEATURES, VEC, ZERO, ADD, STEP, SETUP)              \
  __attribute__((target(FEATURES))) float NAME() {                          \
    SETUP;                                                                  \
    VEC acc[12];                                                            \
    for (VEC &a : acc)                                                      \
      a = ZERO();                                                           \
    for (int n = 0; n < kIterations; ++n)                                   \
      for (VEC &a : acc)                                                    \
        a = STEP;                                                           \
    VEC sum = ZERO();                                                       \
    for (VEC &a : acc)                                                      \
      sum = ADD(sum, a);                                                    \
    float lanes[sizeof(VEC) / sizeof(float)];                               \
    __builtin_memcpy(lanes, &sum, sizeof(sum));                             \
    return lanes[0];                                                        \
  }

VMOE_PROBE(fma512, "avx512f", __m512, _mm512_setzero_ps, _mm512_add_ps,
           _mm512_fmadd_ps(x, x, a), __m512 x = _mm512_set1_ps(1e-3f))
VMOE_PROBE(dot512, "avx512f,avx512bf16", __m512, _mm512_setzero_ps,
           _mm512_add_ps, _mm512_dpbf16_ps(a, x, x),
           __m512bh x = (__m512bh)_mm512_set1_epi16(0x3a83)) // 1e-3
VMOE_PROBE(fma256, "avx2,fma", __m256, _mm256_setzero_ps, _mm256_add_ps,
           _mm256_fmadd_ps(x, x, a), __m256 x = _mm256_set1_ps(1e-3f))
VMOE_PROBE(dot256, "avx512f,avx512vl,avx512bf16", __m256, _mm256_setzero_ps,
           _mm256_add_ps, _mm256_dpbf16_ps(a, x, x),
           __m256bh x = (__m256bh)_mm256_set1_epi16(0x3a83))
#undef VMOE_PROBE
} // namespace
#endif

std::optional<double> mlir::vmoe::measureBF16DotSpeedup(unsigned lanes) {
#if defined(__x86_64__)
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  bool wide = lanes >= 16;
  if (!host.lookup("avx512bf16") || !host.lookup("avx512f") ||
      (!wide && !host.lookup("avx512vl")))
    return std::nullopt;
  // Best of five alternating runs (the first ones also wake the vector
  // units and settle the clock); a dot product is twice an fma's flops.
  volatile float sink = 0;
  double fma = 1e30, dot = 1e30;
  for (int round = 0; round < 5; ++round) {
    fma = std::min(fma, seconds([&] { sink = wide ? fma512() : fma256(); }));
    dot = std::min(dot, seconds([&] { sink = wide ? dot512() : dot256(); }));
  }
  (void)sink;
  return 2.0 * fma / dot;
#else
  (void)lanes;
  return std::nullopt;
#endif
}

BF16KernelChoice mlir::vmoe::chooseBF16Kernels(const llvm::MCSubtargetInfo &cpu,
                                               unsigned lanes, bool onHost,
                                               bool always,
                                               std::optional<double> speedup) {
  BF16KernelChoice choice;
  // vdpbf16ps on 512-bit vectors needs AVX512_BF16, on 256 or 128 bits
  // AVX512VL too; elsewhere bf16 products take the shift + fma path.
  choice.dot = cpu.checkFeatures("+avx512bf16") &&
               (lanes >= 16 ? cpu.checkFeatures("+avx512f")
                            : cpu.checkFeatures("+avx512vl"));
  if (always) {
    choice.reason = "--bf16-kernels=always";
    return choice;
  }
  if (!choice.dot) {
    // Measured on V-MoE-S/32 (bench/README.md): shift + fma on 16 lanes
    // (AVX-512 without BF16) 1.08x f32, on 8 lanes (AVX2) 0.87x.
    choice.bf16 = lanes >= 16;
    choice.reason = choice.bf16
                        ? "no AVX512_BF16: shift + fma products on 16 lanes"
                        : "no AVX512_BF16 and 8 lanes: shift + fma products "
                          "are slower than f32";
    return choice;
  }
  if (onHost && !speedup)
    speedup = measureBF16DotSpeedup(lanes);
  if (!speedup) {
    choice.reason = "not measured: the target CPU is not the host";
    return choice;
  }
  choice.bf16 = *speedup >= kMinSpeedup;
  choice.reason = llvm::formatv("vdpbf16ps measured {0:F2}x the flops of f32 "
                                "fma here ({1} {2:F1})",
                                *speedup, choice.bf16 ? ">=" : "<",
                                kMinSpeedup);
  return choice;
}
