//===- DeviceFunctions.cpp - What emulated kernels call ---------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The device side of vmoe_gpu_emulator.h, and the libdevice functions
// (__nv_*) convert-gpu-to-nvvm calls, on the host's libm. Fragment layouts
// are those of the PTX ISA ("Matrix fragments for mma.m16n8k8",
// "... mma.m16n8k16", "ldmatrix"), with g = lane / 4, t = lane % 4:
//
//   m16n8k8 .tf32   A a0..a3 = (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4)
//                   B b0..b1 = (k = t, n = g), (k = t + 4, n = g)
//   m16n8k16 .bf16/.f16 (two elements per register, the first in the low
//                   half)   A reg i = row g + 8 (i % 2), cols 2t + 8 (i / 2)
//                   + {0, 1};  B reg j = k = 2t + 8 j + {0, 1}, n = g
//   C, D            c0..c3 = (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)
//   ldmatrix m8n8   lanes 8j .. 8j + 7 give the rows of matrix j; lane l
//                   gets (row l / 4, cols 2 (l % 4) + {0, 1}) of each
//                   matrix, with .trans (rows 2 (l % 4) + {0, 1}, col l / 4)
//
// Tensor-core numerics as on the hardware for what the kernels rely on:
// TF32 operands keep their top 19 bits (the low 13 are ignored), products
// are exact, and the sum of a k step with the accumulator is rounded once
// to FP32 (the hardware's internal order is unspecified).
//
//===----------------------------------------------------------------------===//

#include "Blocks.h"

#include <cmath>
#include <cstring>

using namespace vmoe::emu;

#define EMU_API extern "C" __attribute__((visibility("default")))

namespace {

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/// The value of a TF32 operand register.
double tf32(uint32_t bits) { return fromBits(bits & 0xffffe000u); }

/// The value of half `high` of a bf16 pair register.
double bf16(uint32_t pair, bool high) {
  return fromBits((high ? pair >> 16 : pair & 0xffffu) << 16);
}

/// The value of half `high` of an f16 pair register.
double f16(uint32_t pair, bool high) {
  uint32_t h = high ? pair >> 16 : pair & 0xffffu;
  uint32_t sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f,
           mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(static_cast<double>(mantissa), -24);
  else if (exponent == 31)
    magnitude = mantissa ? NAN : INFINITY;
  else
    magnitude = std::ldexp(static_cast<double>(mantissa | 0x400),
                           static_cast<int>(exponent) - 25);
  return sign ? -magnitude : magnitude;
}

} // namespace

EMU_API int32_t __vmoe_emu_sreg(int32_t which) {
  return specialRegister(which);
}

EMU_API void __vmoe_emu_barrier(void) { blockBarrier(); }

EMU_API void __vmoe_emu_mma(int32_t kind, const uint32_t *a,
                            const uint32_t *b, const float *c, float *d) {
  if (kind != VMOE_EMU_MMA_M16N8K8_TF32 &&
      kind != VMOE_EMU_MMA_M16N8K16_BF16 && kind != VMOE_EMU_MMA_M16N8K16_F16)
    fail("mma.sync of unknown kind " + std::to_string(kind));
  LaneData mine = {};
  std::memcpy(mine.words, a, 4 * sizeof(uint32_t));
  std::memcpy(mine.words + 4, b, 2 * sizeof(uint32_t));
  std::memcpy(mine.accumulators, c, 4 * sizeof(float));
  warpCollective("mma.sync", /*fullWarp=*/true, mine,
                 [&](const LaneData *lanes, unsigned, unsigned lane) {
    // The warp's A (16 x K), B (K x 8) and C (16 x 8).
    double matA[16][16] = {}, matB[16][8] = {};
    int k = kind == VMOE_EMU_MMA_M16N8K8_TF32 ? 8 : 16;
    for (unsigned l = 0; l < 32; ++l) {
      unsigned g = l / 4, t = l % 4;
      const uint32_t *w = lanes[l].words;
      if (kind == VMOE_EMU_MMA_M16N8K8_TF32) {
        matA[g][t] = tf32(w[0]);
        matA[g + 8][t] = tf32(w[1]);
        matA[g][t + 4] = tf32(w[2]);
        matA[g + 8][t + 4] = tf32(w[3]);
        matB[t][g] = tf32(w[4]);
        matB[t + 4][g] = tf32(w[5]);
        continue;
      }
      auto half = kind == VMOE_EMU_MMA_M16N8K16_BF16 ? bf16 : f16;
      for (unsigned i = 0; i < 4; ++i) {
        unsigned row = g + 8 * (i % 2), col = 2 * t + 8 * (i / 2);
        matA[row][col] = half(w[i], false);
        matA[row][col + 1] = half(w[i], true);
      }
      for (unsigned j = 0; j < 2; ++j) {
        unsigned kk = 2 * t + 8 * j;
        matB[kk][g] = half(w[4 + j], false);
        matB[kk + 1][g] = half(w[4 + j], true);
      }
    }
    unsigned g = lane / 4, t = lane % 4;
    for (unsigned e = 0; e < 4; ++e) {
      unsigned row = g + 8 * (e / 2), col = 2 * t + e % 2;
      double sum = lanes[lane].accumulators[e];
      for (int kk = 0; kk < k; ++kk)
        sum += matA[row][kk] * matB[kk][col];
      d[e] = static_cast<float>(sum);
    }
  });
}

EMU_API void __vmoe_emu_ldmatrix(int32_t num, int32_t trans,
                                 const void *address, uint32_t *out) {
  if (num != 1 && num != 2 && num != 4)
    fail("ldmatrix .x" + std::to_string(num));
  if (reinterpret_cast<uintptr_t>(address) % 16 != 0)
    fail("ldmatrix row address not 16-byte aligned");
  LaneData mine = {};
  mine.address = address;
  warpCollective("ldmatrix", /*fullWarp=*/true, mine,
                 [&](const LaneData *lanes, unsigned, unsigned lane) {
    for (int32_t j = 0; j < num; ++j) {
      auto element = [&](unsigned row, unsigned col) -> uint32_t {
        uint16_t v;
        std::memcpy(&v,
                    static_cast<const char *>(lanes[8 * j + row].address) +
                        2 * col,
                    sizeof(v));
        return v;
      };
      unsigned r = lane / 4, c = 2 * (lane % 4);
      out[j] = trans ? element(c, r) | element(c + 1, r) << 16
                     : element(r, c) | element(r, c + 1) << 16;
    }
  });
}

EMU_API void __vmoe_emu_cp_async(void *destination, const void *source,
                                 int32_t size, int32_t sourceSize) {
  asyncCopy(destination, source, size, sourceSize);
}

EMU_API void __vmoe_emu_cp_async_commit(void) { asyncCommit(); }

EMU_API void __vmoe_emu_cp_async_wait(int32_t pending) { asyncWait(pending); }

EMU_API uint32_t __vmoe_emu_shfl(int32_t kind, uint32_t mask, uint32_t value,
                                 int32_t laneOrOffset, int32_t clamp,
                                 uint8_t *valid) {
  LaneData mine = {};
  mine.words[0] = value;
  mine.mask = mask;
  uint32_t result = value;
  bool inRange = false;
  warpCollective("shfl.sync", /*fullWarp=*/false, mine,
                 [&](const LaneData *lanes, unsigned count, unsigned lane) {
    // PTX ISA, shfl.sync: c holds the clamp value in bits 0-4 and the
    // segment mask in bits 8-12.
    int32_t b = laneOrOffset & 0x1f, c = clamp & 0x1f,
            segment = (clamp >> 8) & 0x1f;
    int32_t self = static_cast<int32_t>(lane);
    int32_t maxLane = (self & segment) | (c & ~segment);
    int32_t minLane = self & segment;
    int32_t j = self;
    bool p = false;
    switch (kind) {
    case 0: j = self ^ b; p = j <= maxLane; break;
    case 1: j = self - b; p = j >= maxLane; break;
    case 2: j = self + b; p = j <= maxLane; break;
    case 3: j = minLane | (b & ~segment); p = j <= maxLane; break;
    default: fail("shfl.sync of unknown kind " + std::to_string(kind));
    }
    if (!p || j < 0 || j >= static_cast<int32_t>(count) ||
        !(mask >> j & 1)) {
      j = self;
      p = p && j < static_cast<int32_t>(count);
    }
    result = lanes[j].words[0];
    inRange = p;
  });
  if (valid)
    *valid = inRange;
  return result;
}

EMU_API uint32_t __vmoe_emu_vote(int32_t kind, uint32_t mask,
                                 int32_t predicate) {
  LaneData mine = {};
  mine.words[0] = predicate != 0;
  uint32_t result = 0;
  warpCollective("vote.sync", /*fullWarp=*/false, mine,
                 [&](const LaneData *lanes, unsigned count, unsigned) {
    uint32_t ballot = 0;
    for (unsigned l = 0; l < count; ++l)
      if ((mask >> l & 1) && lanes[l].words[0])
        ballot |= 1u << l;
    uint32_t members = mask & (count == 32 ? ~0u : (1u << count) - 1);
    switch (kind) {
    case 0: result = ballot != 0; break;
    case 1: result = ballot == members; break;
    case 2: result = ballot; break;
    case 3: result = ballot == 0 || ballot == members; break;
    default: fail("vote.sync of unknown kind " + std::to_string(kind));
    }
  });
  return result;
}

//===----------------------------------------------------------------------===//
// libdevice
//===----------------------------------------------------------------------===//

#define EMU_UNARY(name, expr)                                                  \
  EMU_API float __nv_##name(float x) { return expr; }
#define EMU_BINARY(name, expr)                                                 \
  EMU_API float __nv_##name(float x, float y) { return expr; }

EMU_UNARY(expf, std::exp(x))
EMU_UNARY(exp2f, std::exp2(x))
EMU_UNARY(expm1f, std::expm1(x))
EMU_UNARY(logf, std::log(x))
EMU_UNARY(log2f, std::log2(x))
EMU_UNARY(log10f, std::log10(x))
EMU_UNARY(log1pf, std::log1p(x))
EMU_UNARY(tanhf, std::tanh(x))
EMU_UNARY(erff, std::erf(x))
EMU_UNARY(sqrtf, std::sqrt(x))
EMU_UNARY(rsqrtf, 1.0f / std::sqrt(x))
EMU_UNARY(fabsf, std::fabs(x))
EMU_UNARY(floorf, std::floor(x))
EMU_UNARY(ceilf, std::ceil(x))
EMU_UNARY(roundf, std::round(x))
EMU_UNARY(truncf, std::trunc(x))
EMU_UNARY(sinf, std::sin(x))
EMU_UNARY(cosf, std::cos(x))
EMU_BINARY(powf, std::pow(x, y))
EMU_BINARY(fmaxf, std::fmax(x, y))
EMU_BINARY(fminf, std::fmin(x, y))
EMU_BINARY(atan2f, std::atan2(x, y))
EMU_API float __nv_fmaf(float x, float y, float z) { return std::fma(x, y, z); }

/// f32 -> bf16, round to nearest even (arith.truncf on the host calls this
/// compiler-rt builtin, which libgcc of Debian 12 lacks).
EMU_API __bf16 __truncsfbf2(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  uint16_t h;
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    h = static_cast<uint16_t>((bits >> 16) | 0x40); // quiet NaN
  else
    h = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1)) >> 16);
  __bf16 result;
  std::memcpy(&result, &h, sizeof(h));
  return result;
}
