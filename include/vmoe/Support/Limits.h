//===- Limits.h - Limits on sizes read from input ---------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The limits of SPEC §11, in one place (docs/Limits.md has the table): every
// size read from a model description, a compiler option, a compiled model's
// manifest, a runtime flag or vmoe IR is checked against these before it is
// used. The values are far above any real model and low enough that sizes
// derived from bounded values are computed with checked arithmetic without
// approaching int64_t's range in the lowering (byte offsets, strides).
//
// Dependency-free (C++ standard library only) so that the runtime of compiled
// models can include it.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_SUPPORT_LIMITS_H
#define VMOE_SUPPORT_LIMITS_H

#include <cstdint>
#include <initializer_list>
#include <limits>

namespace vmoe::limits {

/// Largest single dimension or count in a description or in vmoe IR: image
/// height/width/channels, patch size, width D, heads, mlp_dim H, classes,
/// experts E, k, group size, capacity B, multiple_of, slots (2^24).
constexpr int64_t kMaxDimension = int64_t(1) << 24;

/// Most elements in one tensor (weight or activation), 2^40 floats (4 TiB).
constexpr int64_t kMaxTensorElements = int64_t(1) << 40;

/// Most floats in the flat weights buffer of a model (2^40, 4 TiB).
constexpr int64_t kMaxTotalWeights = int64_t(1) << 40;

/// Most transformer blocks (`depth`).
constexpr int64_t kMaxDepth = 1024;

/// Deepest nesting of JSON arrays and objects in any file vmoe reads
/// (descriptions, safetensors headers, manifests). The deepest real input
/// nests 4 levels; llvm::json's parser recurses once per level.
constexpr unsigned kMaxJsonNesting = 64;

/// Deepest nesting of brackets ( [ { < in MLIR text the tools read: MLIR's
/// parser recurses once per level and overflows the stack near 20,000.
constexpr unsigned kMaxMlirNesting = 1024;

/// Most OpenMP threads a model may be asked to run on (`--threads`).
constexpr int64_t kMaxThreads = 1024;

/// Largest capacity ratio C (`capacity_ratio`, `--capacity-ratio`,
/// `--max-capacity-ratio`, the runtime's ratio). C = E already gives every
/// expert room for every token; 4096 leaves room for any E used in practice.
constexpr double kMaxCapacityRatio = 4096.0;

/// Largest height or width of an image a model reads (a decoded PNG or JPEG,
/// and every image a preprocessing op makes); JPEG's own limit is 65500.
constexpr int64_t kMaxImageSide = 65535;

/// Most pixels (height * width) in such an image, 2^27: a 134-megapixel
/// photo, 403 MB decoded as RGB.
constexpr int64_t kMaxImagePixels = int64_t(1) << 27;

/// Most scans of a progressive JPEG (each scan passes over the whole
/// image; libjpeg-turbo's recommended limit against slow decodes).
constexpr int kMaxJpegScans = 500;

/// a + b for a, b >= 0, saturating at INT64_MAX: sizes above every limit
/// stay above it instead of wrapping.
inline int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum))
    return std::numeric_limits<int64_t>::max();
  return sum;
}

/// a * b for a, b >= 0, saturating at INT64_MAX.
inline int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product))
    return std::numeric_limits<int64_t>::max();
  return product;
}

/// The product of non-negative `dims`, saturating at INT64_MAX.
template <typename Range> inline int64_t saturatingProduct(const Range &dims) {
  int64_t product = 1;
  for (int64_t dim : dims)
    product = saturatingMul(product, dim);
  return product;
}

/// The product of non-negative `dims`, saturating at INT64_MAX.
inline int64_t saturatingProduct(std::initializer_list<int64_t> dims) {
  int64_t product = 1;
  for (int64_t dim : dims)
    product = saturatingMul(product, dim);
  return product;
}

} // namespace vmoe::limits

#endif // VMOE_SUPPORT_LIMITS_H
