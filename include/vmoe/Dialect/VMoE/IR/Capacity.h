//===- Capacity.h - Per-expert capacity rule --------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The capacity rule of SPEC §4, shared by the verifier, vmoe-buffer-sizing,
// the vmoe.capacity folder and the runtime of compiled models. It depends on
// nothing but the C++ standard library so that the runtime can include it.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_DIALECT_VMOE_IR_CAPACITY_H
#define VMOE_DIALECT_VMOE_IR_CAPACITY_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace vmoe {

/// Rounding applied to k*S*C/E (mirrors the CapacityRule enum).
enum class CapacityRounding { Round, Ceil };

/// The unrounded capacity k*S*C/E, evaluated left to right in double
/// precision as the spec requires.
inline double rawCapacity(int64_t k, int64_t tokensPerGroup, double ratio,
                          int64_t numExperts) {
  return static_cast<double>(k) * static_cast<double>(tokensPerGroup) * ratio /
         static_cast<double>(numExperts);
}

/// Rounds `raw` by `rule` (round: nearest, ties to even) and raises it to a
/// multiple of `multipleOf`. May return 0 or less: callers diagnose B < 1.
inline int64_t roundCapacity(double raw, CapacityRounding rule,
                             int64_t multipleOf) {
  double rounded = rule == CapacityRounding::Ceil ? std::ceil(raw)
                                                  : std::nearbyint(raw);
  // Keep absurd ratios from overflowing the conversion; NaN maps to 0.
  constexpr double kLimit = 4611686018427387904.0; // 2^62
  if (!(rounded > 0))
    return 0;
  if (rounded > kLimit)
    rounded = kLimit;
  auto b = static_cast<int64_t>(rounded);
  if (multipleOf > 1 && b % multipleOf != 0)
    b += multipleOf - b % multipleOf;
  return b;
}

/// B = rule(k*S*C/E) raised to a multiple of `multipleOf`.
inline int64_t computeCapacity(int64_t k, int64_t tokensPerGroup,
                               double ratio, int64_t numExperts,
                               CapacityRounding rule, int64_t multipleOf) {
  return roundCapacity(rawCapacity(k, tokensPerGroup, ratio, numExperts), rule,
                       multipleOf);
}

/// Formats a double with the fewest digits that read back exactly ("1.05",
/// "0.0025", "nan"), for messages that quote user-given values.
inline std::string formatShortest(double value) {
  char buffer[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  return buffer;
}

/// "k*S*C/E = 2*4*0.01/32 = 0.0025": the arithmetic behind a capacity, for
/// the "capacity rounds to 0" diagnostics of the verifier, the sizing pass
/// and the runtime.
inline std::string describeRawCapacity(int64_t k, int64_t tokensPerGroup,
                                       double ratio, int64_t numExperts) {
  return "k*S*C/E = " + std::to_string(k) + "*" +
         std::to_string(tokensPerGroup) + "*" + formatShortest(ratio) + "/" +
         std::to_string(numExperts) + " = " +
         formatShortest(rawCapacity(k, tokensPerGroup, ratio, numExperts));
}

} // namespace vmoe

#endif // VMOE_DIALECT_VMOE_IR_CAPACITY_H
