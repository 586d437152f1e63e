//===- OptionChecks.h - Checks of option values -----------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The checks every option value goes through where it is parsed: the
// options of vmoe-compile, of the vmoe passes and of the pipelines
// (docs/Limits.md, "Options"). Each returns an error naming the option, the
// allowed values and the value given, in one line; the caller adds where
// the option comes from ("vmoe-buffer-sizing: ", "--vector-width").
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_SUPPORT_OPTIONCHECKS_H
#define VMOE_SUPPORT_OPTIONCHECKS_H

#include "vmoe/Dialect/VMoE/IR/Capacity.h"
#include "vmoe/Support/Limits.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cmath>
#include <cstdint>
#include <string>

namespace vmoe {

/// "<name> <problem>" as an llvm::Error.
inline llvm::Error optionError(llvm::StringRef name,
                               const llvm::Twine &problem) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 name + " " + problem);
}

/// `value` in [lo, hi]: "<name> must be in [lo, hi], got v".
inline llvm::Error checkRange(llvm::StringRef name, int64_t value, int64_t lo,
                              int64_t hi) {
  if (value >= lo && value <= hi)
    return llvm::Error::success();
  return optionError(name, "must be in [" + llvm::Twine(lo) + ", " +
                               llvm::Twine(hi) + "], got " +
                               llvm::Twine(value));
}

/// `value` >= lo: "<name> must be >= lo, got v".
inline llvm::Error checkAtLeast(llvm::StringRef name, int64_t value,
                                int64_t lo) {
  if (value >= lo)
    return llvm::Error::success();
  return optionError(name, "must be >= " + llvm::Twine(lo) + ", got " +
                               llvm::Twine(value));
}

/// `value` one of `choices`: "<name> must be a, b or c, got 'x'".
inline llvm::Error checkChoice(llvm::StringRef name, llvm::StringRef value,
                               llvm::ArrayRef<llvm::StringRef> choices) {
  std::string list;
  for (auto [index, choice] : llvm::enumerate(choices)) {
    if (choice == value)
      return llvm::Error::success();
    if (index > 0)
      list += index + 1 == choices.size() ? " or " : ", ";
    list += choice.str();
  }
  return optionError(name, "must be " + list + ", got '" + value + "'");
}

/// A capacity ratio option where 0 keeps each op's own ratio: 0, or finite
/// in (0, limits::kMaxCapacityRatio].
inline llvm::Error checkRatioOrZero(llvm::StringRef name, double value) {
  if (value == 0 || (std::isfinite(value) && value > 0 &&
                     value <= limits::kMaxCapacityRatio))
    return llvm::Error::success();
  return optionError(name, "must be 0 (keep each op's ratio) or a finite "
                           "number in (0, " +
                               formatShortest(limits::kMaxCapacityRatio) +
                               "], got " + formatShortest(value));
}

} // namespace vmoe

#endif // VMOE_SUPPORT_OPTIONCHECKS_H
