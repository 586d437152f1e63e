//===- SizeLimits.cpp - Limits on sizes derived from descriptions ---------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Every product here is computed with llvm::checkedMul (or saturating), so a
// hostile description is an error naming its field, never a wrapped size, an
// allocation failure or invalid IR later.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Frontend/SizeLimits.h"

#include "ForwardBuilder.h"

#include "vmoe/Frontend/ModelBuilder.h"
#include "vmoe/Dialect/VMoE/IR/Capacity.h"
#include "vmoe/Frontend/ModelDescription.h"
#include "vmoe/Support/Limits.h"

#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir::vmoe::frontend;
namespace limits = ::vmoe::limits;
using llvm::Error;

static Error sizeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The product of `dims`, or nullopt on overflow.
static std::optional<int64_t> product(std::initializer_list<int64_t> dims) {
  std::optional<int64_t> result = 1;
  for (int64_t dim : dims) {
    result = llvm::checkedMul(*result, dim);
    if (!result)
      return std::nullopt;
  }
  return result;
}

/// Formats [a, b, ...].
static std::string formatDims(std::initializer_list<int64_t> dims) {
  std::string text = "[";
  for (int64_t dim : dims)
    text += (text.size() > 1 ? ", " : "") + std::to_string(dim);
  return text + "]";
}

/// `field`: `what` `dims` must have at most `limit` elements.
static Error checkElements(llvm::StringRef field, llvm::StringRef what,
                           std::initializer_list<int64_t> dims,
                           int64_t limit = limits::kMaxTensorElements) {
  std::optional<int64_t> n = product(dims);
  if (n && *n <= limit)
    return Error::success();
  return sizeError(llvm::formatv("{0}: {1} {2} has {3} elements, above the "
                                 "limit {4}",
                                 field, what, formatDims(dims),
                                 n ? std::to_string(*n) : "over 2^63", limit));
}

Error mlir::vmoe::frontend::checkCapacityRatio(llvm::StringRef field,
                                               double ratio) {
  if (!(ratio > 0))
    return sizeError(field + ": must be > 0, got " +
                     ::vmoe::formatShortest(ratio));
  if (!(ratio <= limits::kMaxCapacityRatio))
    return sizeError(field + ": must be <= " +
                     ::vmoe::formatShortest(limits::kMaxCapacityRatio) +
                     " (the limit), got " + ::vmoe::formatShortest(ratio));
  return Error::success();
}

Error mlir::vmoe::frontend::checkTokenCounts(const ModelDescription &model) {
  // Each factor is at most kMaxDimension (2^24): the products fit in int64.
  int64_t patches = (model.height / model.patchHeight) *
                    (model.width / model.patchWidth);
  if (patches > limits::kMaxDimension)
    return sizeError(llvm::formatv(
        "patch_size: {0}x{1} patches of a {2}x{3} image are {4} tokens, "
        "above the limit {5}",
        model.patchHeight, model.patchWidth, model.height, model.width,
        patches, limits::kMaxDimension));
  if (Error e = checkElements("patch_size", "the patch vector of",
                              {model.channels, model.patchHeight,
                               model.patchWidth},
                              limits::kMaxDimension))
    return e;
  if (!model.hasMoE || model.moe.groupTokens)
    return Error::success();
  // moe.group_size may come from --group-size, unbounded.
  int64_t tokens = model.tokensPerImage();
  std::optional<int64_t> perGroup = llvm::checkedMul(model.moe.groupSize,
                                                     tokens);
  if (!perGroup || *perGroup > limits::kMaxDimension)
    return sizeError(llvm::formatv(
        "moe.group_size: {0} images of {1} tokens are {2} tokens per group, "
        "above the limit {3}",
        model.moe.groupSize, tokens,
        perGroup ? std::to_string(*perGroup) : "over 2^63",
        limits::kMaxDimension));
  return Error::success();
}

Error mlir::vmoe::frontend::checkWeightSizes(const ModelDescription &model) {
  std::vector<WeightTensor> layout = weightLayout(model);
  for (const WeightTensor &tensor : layout) {
    int64_t n = tensor.numElements();
    if (n <= limits::kMaxTensorElements)
      continue;
    std::string shape = "[";
    for (int64_t dim : tensor.shape)
      shape += (shape.size() > 1 ? ", " : "") + std::to_string(dim);
    return sizeError(llvm::formatv(
        "weights: tensor '{0}' {1}] has {2} elements, above the limit {3}",
        tensor.name, shape,
        n == std::numeric_limits<int64_t>::max() ? "over 2^63"
                                                 : std::to_string(n),
        limits::kMaxTensorElements));
  }
  int64_t total = weightsSize(layout);
  if (total > limits::kMaxTotalWeights)
    return sizeError(llvm::formatv(
        "weights: {0} floats in all, above the limit {1}",
        total == std::numeric_limits<int64_t>::max() ? "over 2^63"
                                                     : std::to_string(total),
        limits::kMaxTotalWeights));
  return Error::success();
}

Error mlir::vmoe::frontend::checkBuildSizes(const ModelDescription &model,
                                            const BuildOptions &options) {
  // Bounded operands (2^24 each): these two products fit.
  int64_t unit = model.imagesPerGroupUnit();
  if (options.groupsPerBatch > limits::kMaxDimension ||
      unit * options.groupsPerBatch > limits::kMaxDimension)
    return sizeError(llvm::formatv(
        "groups-per-batch: {0} groups of {1} images, above the limit of {2} "
        "images per batch",
        options.groupsPerBatch, unit, limits::kMaxDimension));
  int64_t n = batchImages(model, options);
  int64_t t = model.tokensPerImage(), d = model.modelWidth;
  if (Error e = checkElements("groups-per-batch", "the input batch",
                              {n, model.channels, model.height, model.width}))
    return e;
  if (Error e = checkElements("groups-per-batch", "the tokens",
                              {n, t, std::max({3 * d, model.mlpDim,
                                               model.expertMlpDim()})}))
    return e;
  if (Error e = checkElements("groups-per-batch", "the attention scores",
                              {n, model.heads, t, t}))
    return e;
  if (!model.hasMoE)
    return Error::success();
  double ratio = maxCapacityRatio(model, options);
  int64_t width = std::max(d, model.expertMlpDim());
  // Each shared expert's buffer holds every token of the batch.
  if (model.moe.sharedExperts)
    if (Error e =
            checkElements("moe.shared_experts", "the shared expert buffers",
                          {model.moe.sharedExperts, n, t, width}))
      return e;
  for (int64_t block : model.moeBlocks()) {
    MoESettings layer = model.layerSettings(block);
    bool soft = layer.routing == "soft";
    int64_t slots = soft ? model.layerSlotsPerExpert(layer)
                         : moeLayerCapacity(model, layer, ratio);
    if (slots > limits::kMaxDimension)
      return sizeError(llvm::formatv(
          "{0}: block {1} has capacity {2} at capacity ratio {3}, above the "
          "limit {4}",
          soft ? "moe.slots_per_expert" : "max-capacity-ratio", block, slots,
          ratio, limits::kMaxDimension));
    int64_t groups =
        std::max<int64_t>(1, n * t / model.layerTokensPerGroup(layer));
    std::string what = llvm::formatv("the expert buffers of block {0}", block);
    if (Error e = checkElements("max-capacity-ratio", what,
                                {model.moe.numExperts, groups, slots, width}))
      return e;
  }
  return Error::success();
}
