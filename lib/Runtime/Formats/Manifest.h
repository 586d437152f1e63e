//===- Manifest.h - Manifest of a compiled vmoe model -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The manifest is the JSON string a compiled model returns from
// vmoe_model_manifest() (docs/ModelFormat.md §5): batch and image sizes,
// input normalization, classes, MoE layers with their capacity rules, and
// the layout of the weights buffer. parseManifest() checks it completely so
// that the rest of the runtime can trust it. Internal to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_FORMATS_MANIFEST_H
#define LIB_RUNTIME_FORMATS_MANIFEST_H

#include "vmoe/Dialect/VMoE/IR/Capacity.h"
#include "vmoe/Support/PreprocessSpec.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace vmoe::runtime {

/// One tensor of the weights buffer.
struct TensorInfo {
  /// Safetensors name, e.g. "blocks.1.moe.w1".
  std::string name;
  /// Dimensions; empty for a scalar.
  llvm::SmallVector<int64_t, 4> shape;
  /// First float of the tensor in the weights buffer (a multiple of 16).
  int64_t offset = 0;
  /// Product of `shape`.
  int64_t numElements = 0;
  /// An expert tensor (dim 0: experts) of which each rank of an expert
  /// parallel model reads only its experts' rows.
  bool expertSharded = false;
  /// Width L of the GEMM panels the tensor is stored in (0: plain). A
  /// [..., K, N] tensor is read from safetensors plain and packed once at
  /// load into [..., N/L, K, L] (docs/ModelFormat.md §5).
  int64_t panelWidth = 0;
  /// With a panel width: the panels hold bf16 pairs ("panel_storage":
  /// "bf16_pairs"), [..., ceil(N/L), ceil(K/2), L] 32-bit words written at
  /// load from the f32 tensor (BF16Panels.h).
  bool bf16Pairs = false;
};

/// One MoE layer: what the runtime needs to check a capacity ratio.
struct MoELayerInfo {
  /// Encoder block index (0-based).
  int64_t block = 0;
  /// Experts E and choices per token k.
  int64_t numExperts = 0;
  int64_t k = 0;
  /// Tokens per routing group S.
  int64_t tokensPerGroup = 0;
  /// Rounding of k*S*C/E and the multiple B is raised to.
  CapacityRounding rule = CapacityRounding::Round;
  int64_t multipleOf = 1;
  /// Slots per expert the compiled buffers hold (B at max_capacity_ratio;
  /// the slots per expert P for Soft MoE).
  int64_t maxCapacity = 0;
  /// A fixed B that ignores the capacity ratio (the description's
  /// moe.capacity); 0 when B follows the ratio.
  int64_t fixedCapacity = 0;
  /// "vanilla" or "bpr" (token choice, k choices per token),
  /// "expert_choice" (k = 1 in the capacity rule) or "soft" (no capacity).
  std::string routing = "vanilla";

  /// Whether the runtime capacity ratio sizes this layer.
  bool hasCapacity() const { return routing != "soft" && !fixedCapacity; }
};

/// A parsed and checked manifest.
struct Manifest {
  std::string name;
  /// "cpu" or "cuda": where the compiled code runs.
  std::string target = "cpu";
  /// Images per compiled batch N.
  int64_t batchImages = 0;
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  /// Per-channel normalization (float32 as the spec requires).
  llvm::SmallVector<float, 3> mean;
  llvm::SmallVector<float, 3> std;
  /// The image preprocessing ("preprocess"; without it decode|resize(H, W)).
  PreprocessSpec preprocess;
  int64_t classes = 0;
  /// Empty, or one name per class.
  std::vector<std::string> classNames;
  double capacityRatio = 0;
  double maxCapacityRatio = 0;
  llvm::SmallVector<MoELayerInfo, 4> moeLayers;
  /// Floats in the weights buffer.
  int64_t weightsSize = 0;
  std::vector<TensorInfo> tensors;
  /// MPI ranks the experts are split over (0: a one-process model).
  int64_t expertParallel = 0;
  /// A training graph (vmoe-compile --training): vmoe_forward has the
  /// losses output [L, 3] after the statistics.
  bool training = false;

  /// Floats per image: channels * height * width.
  int64_t imageSize() const { return channels * height * width; }
  /// Experts of every MoE layer (0 without MoE layers).
  int64_t numExperts() const {
    return moeLayers.empty() ? 0 : moeLayers.front().numExperts;
  }
  /// Floats of the losses output of a training graph: L * 3.
  int64_t lossesSize() const {
    return training ? static_cast<int64_t>(moeLayers.size()) * 3 : 0;
  }
  /// Int32 statistics per forward call: L * (E + 1).
  int64_t statsSize() const {
    return static_cast<int64_t>(moeLayers.size()) * (numExperts() + 1);
  }
};

/// Parses and checks `json`. Errors read "manifest: <field>: <problem>".
/// Unknown fields are ignored; "input" (default mean 0, std 1),
/// "preprocess" (default decode|resize(height, width)) and "class_names"
/// (empty: none) are optional, every other field is required.
llvm::Expected<Manifest> parseManifest(llvm::StringRef json);

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_FORMATS_MANIFEST_H
