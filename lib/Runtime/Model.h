//===- Model.h - A compiled vmoe model with its weights ---------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The C++ side of the runtime API: a model is the linked-in manifest, the
// weights buffer loaded from safetensors, and scratch buffers for one batch.
// forward() splits any number of images into compiled batches, pads the last
// one with all-zero images (masked out of routing, or routed with
// Padding::Zeros) and sums the routing statistics. Internal to
// lib/Runtime; vmoe_runtime.h wraps it for C.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_MODEL_H
#define LIB_RUNTIME_MODEL_H

#include "AlignedBuffer.h"
#include "DeviceMemory.h"
#include "Formats/Manifest.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>

namespace vmoe::runtime {

/// How the padding images of a short last batch take part in routing.
enum class Padding {
  /// Their tokens are masked out of routing and take no capacity: a real
  /// image's result does not depend on them (the default).
  Masked,
  /// They are routed like real images (the original V-MoE evaluation).
  Zeros,
};

/// A model ready to run: manifest, weights and batch buffers.
class Model {
public:
  /// Parses `manifestJson` and loads the weights from the safetensors file
  /// `weightsPath`.
  static llvm::Expected<std::unique_ptr<Model>>
  load(llvm::StringRef manifestJson, llvm::StringRef weightsPath);

  const Manifest &getManifest() const { return manifest; }

  Padding getPadding() const { return padding; }
  void setPadding(Padding mode) { padding = mode; }

  /// Checks that `ratio` is finite, > 0, at most max_capacity_ratio, and
  /// gives every MoE layer between 1 and max_capacity slots per expert.
  llvm::Error checkCapacityRatio(double ratio) const;

  /// Reads a PNG or JPEG file of any size as a normalized image of this
  /// model (imageSize() floats), preprocessed as the manifest says.
  llvm::Error readImage(llvm::StringRef path, float *pixels) const;

  /// Runs `count` images (count * imageSize() floats) at capacity ratio
  /// `ratio`; writes count * classes logits and, when `stats` is not null,
  /// the statistics summed over all batches (statsSize() entries).
  llvm::Error forward(const float *images, int64_t count, double ratio,
                      float *logits, int32_t *stats);

  /// A training graph: the mean over all groups of the last forward() of
  /// each MoE layer's importance, load and GShard losses (lossesSize()
  /// values, layer-major); empty for an inference graph.
  llvm::ArrayRef<double> getLossMeans() const { return lossMeans; }

private:
  Model() = default;
  /// Packs `tensor` (at `data`) into its panel layout, in place.
  static void packPanels(float *data, const TensorInfo &tensor);

  /// Runs one compiled batch: `real` images (the rest padding); leaves
  /// the logits and statistics in the batch buffers.
  llvm::Error runBatch(const float *images, int64_t real, double ratio);

  Manifest manifest;
  Padding padding = Padding::Masked;
  /// manifest.weightsSize floats (on the host for a CPU model; for a CUDA
  /// model only while loading).
  AlignedBuffer<float> weights;
  /// One batch of images, its logits and its statistics.
  AlignedBuffer<float> batchImages;
  AlignedBuffer<float> batchLogits;
  AlignedBuffer<int32_t> batchStats;
  /// A training graph's losses of one batch, and the means of forward().
  AlignedBuffer<float> batchLosses;
  std::vector<double> lossMeans;
  /// A CUDA model's weights, uploaded once at load and resident, and the
  /// device copies of the batch buffers, copied once per batch each way.
  DeviceBuffer<float> deviceWeights;
  DeviceBuffer<float> deviceImages;
  DeviceBuffer<float> deviceLogits;
  DeviceBuffer<int32_t> deviceStats;
};

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_MODEL_H
