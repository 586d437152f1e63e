//===- ModelDescription.h - V-MoE model descriptions ------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The model description of docs/ModelFormat.md §1: parsed from JSON with one
// error per bad field (naming it), plus what follows from it: tokens per
// image, MoE placement and the weight tensors with their offsets.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_FRONTEND_MODELDESCRIPTION_H
#define VMOE_FRONTEND_MODELDESCRIPTION_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::vmoe::frontend {

/// An entry of `moe.overrides`: the MoE blocks it lists use its fields
/// instead of those of the `moe` object (absent fields are inherited).
struct MoEOverride {
  llvm::SmallVector<int64_t> blocks;
  std::optional<std::string> routing, score, order, capacityRule, activation;
  std::optional<int64_t> k, multipleOf, slotsPerExpert, softGroupSize;
  std::optional<bool> normalize;
};

/// The MoE settings of a description (`moe` object), or of one MoE layer
/// (ModelDescription::layerSettings).
struct MoESettings {
  /// "every-2", "every-n", "last-n" or "layers" (docs/ModelFormat.md §1).
  std::string placement = "every-2";
  int64_t lastN = 0;           ///< With "last-n" only.
  int64_t every = 0;           ///< With "every-n" only.
  std::vector<int64_t> layers; ///< With "layers" only: sorted, distinct.
  int64_t numExperts = 0;
  int64_t k = 0; ///< Token choice only; 0 when absent.
  /// Hidden width of the experts; 0 = the model's mlp_dim.
  int64_t mlpDim = 0;
  /// The experts: "mlp" (act(x.w1 + b1).w2 + b2) or "swiglu"
  /// ((silu(x.w_gate) * (x.w_up)).w_down; token choice only).
  std::string expert = "mlp";
  /// Shared experts (of kind `expert`) every token passes through; their
  /// outputs are added to the routed output.
  int64_t sharedExperts = 0;
  /// Dropless (`capacity_ratio: "none"`, token choice only): every expert
  /// has room for every token of its group, B = S; nothing is dropped.
  bool dropless = false;
  double capacityRatio = 1.05;
  /// A fixed per-expert capacity B (V-MoE's `capacity`); 0 = B follows
  /// from the capacity ratio.
  int64_t capacity = 0;
  std::string capacityRule = "round"; ///< "round" or "ceil".
  int64_t multipleOf = 1;
  /// "vanilla" or "bpr" (token choice), "expert_choice" or "soft".
  std::string routing = "vanilla";
  std::string score = "max";       ///< "max" or "sum_topk".
  std::string order = "softmax_topk";
  bool normalize = false;
  std::string activation = "gelu_tanh";
  int64_t groupSize = 1; ///< Images per routing group.
  /// Tokens per routing group when it is not a whole number of images
  /// (V-MoE's `group_size`); 0 = groupSize images.
  int64_t groupTokens = 0;
  /// Soft MoE: slots per expert P (0: round(S/E) of a Soft MoE group).
  int64_t slotsPerExpert = 0;
  /// Soft MoE: images per Soft MoE group (divides groupSize).
  int64_t softGroupSize = 1;
  /// Per-block overrides (`moe.overrides`), in description order.
  std::vector<MoEOverride> overrides;

  /// Token choice routing (vanilla or BPR): k choices per token.
  bool isTokenChoice() const {
    return routing == "vanilla" || routing == "bpr";
  }
  /// The k of the capacity rule: k for token choice, 1 for expert choice.
  int64_t capacityChoices() const { return isTokenChoice() ? k : 1; }
};

/// A V-MoE ViT (docs/ModelFormat.md §1).
struct ModelDescription {
  std::string name;
  int64_t height = 0, width = 0, channels = 0;
  std::vector<double> mean, std;
  /// The image preprocessing (`preprocess`, docs/ModelFormat.md §4), as
  /// written; empty without one.
  std::string preprocess;
  int64_t patchHeight = 0, patchWidth = 0;
  int64_t modelWidth = 0; ///< D.
  int64_t depth = 0;
  int64_t heads = 0;
  int64_t mlpDim = 0; ///< H.
  int64_t classes = 0;
  std::vector<std::string> classNames;
  /// "token" (class token), "gap" (mean over tokens) or "map" (multihead
  /// attention pooling).
  std::string head = "token";
  /// Where final_ln applies: "tokens" (every token, before pooling) or
  /// "pooled" (the pooled vector, timm's fc_norm).
  std::string finalNorm = "tokens";
  /// Width of the dense + tanh pre-logits layer; 0 = none.
  int64_t representationSize = 0;
  double layerNormEpsilon = 1e-6;
  /// The normalization of every norm layer (ln1, ln2, final_ln, map.ln):
  /// "layernorm" (scale and bias) or "rmsnorm" (scale only).
  std::string norm = "layernorm";
  std::string mlpActivation = "gelu_tanh";
  /// False for a dense ViT (no `moe` object).
  bool hasMoE = true;
  MoESettings moe;

  /// Patches per image.
  int64_t numPatches() const {
    return (height / patchHeight) * (width / patchWidth);
  }
  /// Tokens per image: the patches, plus the class token with head "token".
  int64_t tokensPerImage() const {
    return numPatches() + (head == "token" ? 1 : 0);
  }
  /// Tokens per routing group, S.
  int64_t tokensPerGroup() const {
    return moe.groupTokens ? moe.groupTokens : moe.groupSize * tokensPerImage();
  }
  /// The smallest number of images that fills whole routing groups:
  /// group_size, or lcm(S, T) / T with group_tokens.
  int64_t imagesPerGroupUnit() const;
  /// Hidden width of the experts.
  int64_t expertMlpDim() const { return moe.mlpDim ? moe.mlpDim : mlpDim; }
  /// A per-expert capacity B that ignores the capacity ratio: moe.capacity,
  /// or S when dropless; 0 when B follows the ratio.
  int64_t fixedCapacity() const {
    return moe.dropless ? tokensPerGroup() : moe.capacity;
  }
  /// Width of the vector the classifier reads.
  int64_t headInputWidth() const {
    return representationSize ? representationSize : modelWidth;
  }
  /// The 0-based indices of the MoE blocks (SPEC §5 placement).
  llvm::SmallVector<int64_t> moeBlocks() const;
  /// True when block `i` holds a MoE layer.
  bool isMoEBlock(int64_t i) const;
  /// The settings of the MoE layer of block `block`: those of `moe`, with
  /// the fields of its `moe.overrides` entry, if any (overrides cleared).
  MoESettings layerSettings(int64_t block) const;
  /// Tokens per group of a MoE layer: one Soft MoE group, else S.
  int64_t layerTokensPerGroup(const MoESettings &layer) const;
  /// Soft MoE slots per expert P of a layer: its slots_per_expert, else
  /// round(S/E) over one Soft MoE group (0 when that rounds to 0).
  int64_t layerSlotsPerExpert(const MoESettings &layer) const;
};

/// Parses and validates a description; errors read `field: problem`.
llvm::Expected<ModelDescription> parseModelDescription(llvm::StringRef json);

/// Re-checks a description after overrides (e.g. vmoe-compile options).
llvm::Error validateModelDescription(const ModelDescription &model);

/// One weight tensor of docs/ModelFormat.md §3 and its place in the flat
/// weights buffer (in floats, a multiple of 16).
struct WeightTensor {
  std::string name;
  llvm::SmallVector<int64_t> shape;
  int64_t offset = 0;
  int64_t numElements() const;
};

/// Every weight tensor of `model`, in a fixed order, with offsets.
std::vector<WeightTensor> weightLayout(const ModelDescription &model);

/// Floats in the flat weights buffer of `layout`.
int64_t weightsSize(const std::vector<WeightTensor> &layout);

} // namespace mlir::vmoe::frontend

#endif // VMOE_FRONTEND_MODELDESCRIPTION_H
