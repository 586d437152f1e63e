//===- ForwardBuilder.h - Emits the forward function of a model -*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The builder of `@vmoe_forward` (docs/ModelFormat.md §2), shared by the
// files that emit one part of the network each: Layers.cpp (weights, linear
// maps, LayerNorm and RMSNorm, elementwise helpers), Embedding.cpp,
// Attention.cpp, DenseMLP.cpp, MoELayer.cpp, SharedExperts.cpp and Head.cpp;
// ModelBuilder.cpp strings the blocks together. Internal to lib/Frontend.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_FRONTEND_FORWARDBUILDER_H
#define LIB_FRONTEND_FORWARDBUILDER_H

#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Frontend/ModelBuilder.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <string>
#include <utility>

namespace mlir::vmoe::frontend {

/// The per-expert capacity of the MoE layer `layer` of `model` at ratio
/// `ratio` (token or expert choice).
int64_t moeLayerCapacity(const ModelDescription &model,
                         const MoESettings &layer, double ratio);

/// The activation enum of a description string (validated by the parser).
Activation parseActivation(llvm::StringRef name);

/// TrainingGraph.cpp: splitmix64's finalizer (the noise generator's hash).
uint64_t splitmix64(uint64_t x);

/// The noise_std of training graphs (V-MoE's default).
constexpr double kTrainingNoiseStd = 1.0;

/// The results of the forward function.
struct ForwardOutputs {
  Value logits; ///< [N, classes]
  Value stats;  ///< [L, E + 1] i32
  /// Training graphs only: [L, 3], per MoE layer the means over the
  /// batch's groups of the importance, load and GShard losses.
  Value losses;
};

/// Emits the forward function of one model at tensor level.
class ForwardBuilder {
public:
  ForwardBuilder(OpBuilder &b, Location loc, const ModelDescription &model,
                 const BuildOptions &options, Value weights);

  /// The whole network: images -> logits [N, classes], stats [L, E + 1]
  /// and, in training graphs, the losses [L, 3]. `validImages` (i64): the
  /// images after the first validImages are padding, masked out of routing.
  ForwardOutputs forward(Value images, Value ratio, Value validImages);

  // Parts of the network (one file each).

  /// Embedding.cpp: images [N, C, H, W] -> tokens [N*T, D]: patch
  /// embedding, the class token (head `token`) and the position embedding.
  Value embed(Value images);
  /// Attention.cpp: multi-head self-attention of x [N*T, D]; with
  /// `classQueriesOnly`, only the class tokens attend (to every token):
  /// [N, D], the rows of the class tokens.
  Value attention(Value x, const std::string &prefix,
                  bool classQueriesOnly = false);
  /// DenseMLP.cpp: the dense MLP of x [M, D].
  Value mlp(Value x, const std::string &prefix);
  /// MoELayer.cpp: the MoE layer of x [M, D] with settings `layer` at
  /// runtime ratio `ratio`; `stats` [E + 1] receives the layer's routing
  /// statistics (token choice: the kept choices per expert and the dropped
  /// choices; the other families: see their files).
  Value moe(Value x, const std::string &prefix, const MoESettings &layer,
            Value ratio, Value &stats);
  /// MoELayer.cpp: the rows [N, D] of the class tokens of the MoE layer of
  /// x [N*T, D]: every token is routed (capacity, BPR order and `stats` as
  /// for moe()), but the experts run on the class tokens' kept choices only.
  Value moeClassTokens(Value x, const std::string &prefix,
                       const MoESettings &layer, Value ratio, Value &stats);
  /// MoELayer.cpp: a token choice layer (vanilla or BPR); `stats` as for
  /// moe(). With `classTokensOnly`, the result is the rows [N, D] of the
  /// class tokens (moeClassTokens).
  Value tokenChoice(Value x, const std::string &prefix,
                    const MoESettings &layer, Value ratio, Value &stats,
                    bool classTokensOnly = false);
  /// SharedExperts.cpp: the experts `prefix`.* (moe.expert: MLP or
  /// SwiGLU) applied to buffers [E, G, B, D].
  Value experts(Value buffers, const std::string &prefix,
                const MoESettings &layer);
  /// SharedExperts.cpp: routed [M, D] plus the moe.shared_experts shared
  /// experts `prefix`.shared.* of x [M, D], added in ascending order.
  Value addSharedExperts(Value x, Value routed, const std::string &prefix,
                         const MoESettings &layer);
  /// TrainingGraph.cpp: the router noise [dims] of MoE block `block`.
  Value trainingNoise(int64_t block, ArrayRef<int64_t> dims);
  /// TrainingGraph.cpp: [3] means over the groups of tokens [G, S, D] of
  /// the router_losses with `noise`.
  Value groupMeanLosses(Value tokens, Value router, Value noise, int64_t k);
  /// ExpertChoiceLayer.cpp: an expert choice layer; `stats` [E + 1] is the
  /// histogram of experts per token (entry j: tokens taken by j experts).
  Value expertChoice(Value x, const std::string &prefix,
                     const MoESettings &layer, Value ratio, Value &stats);
  /// SoftMoELayer.cpp: a Soft MoE layer; `stats` [E + 1] holds the slots
  /// each expert processed, then 0 (nothing is dropped).
  Value softMoE(Value x, const std::string &prefix, const MoESettings &layer,
                Value &stats);
  /// Head.cpp: final LayerNorm, pooling, pre-logits and the classifier:
  /// x [N*T, D] -> logits [N, classes]; x [N, D] when `classTokensOnly`
  /// (the last block computed the class tokens' rows only).
  Value head(Value x, bool classTokensOnly = false);
  /// Head.cpp: whether the last block may compute only the class tokens'
  /// rows: a class-token head, no training graph, no expert parallelism,
  /// and BuildOptions::allTokenRows unset.
  bool lastBlockForClassTokens() const;
  /// Head.cpp: the rows of the class tokens (token 0 of each image) of
  /// x [N*T, D] -> [N, D].
  Value classTokens(Value x);

  // Building blocks (Layers.cpp).

  /// The weight tensor `name` as a tensor of its shape.
  Value weight(const std::string &name);
  /// Its floats: the 1-D slice of the weights buffer.
  Value flatWeight(const std::string &name);
  /// WeightPanels.cpp: the kernel `name` [..., K, N] (expert or dense) as a
  /// tensor of `shape` (default: its own; leading unit dims may be added),
  /// through vmoe.unpack_panels when it is stored in panel layout.
  Value kernel(const std::string &name, ArrayRef<int64_t> shape = {});
  /// WeightPanels.cpp: columns [first, first + count) of the 2-D kernel
  /// `name` [K, N]: a range of its panels when stored in panel layout
  /// (first and count multiples of the panel width), else a slice.
  Value kernelColumns(const std::string &name, int64_t first, int64_t count);
  /// x [M, K] . kernel [K, N] + bias [N] with `prefix`.kernel/.bias; with
  /// `columns` = (first, count) only those output columns; with
  /// `roundToBF16` the sum rounded into a new bf16 tensor (for a consumer
  /// that rounds its operands to bf16 anyway).
  Value linear(Value x, const std::string &prefix,
               std::optional<std::pair<int64_t, int64_t>> columns = {},
               bool roundToBF16 = false);
  /// x [..., N] + v [N] (v broadcast over the leading dims).
  Value addBroadcastLast(Value x, Value v);
  /// a + b elementwise (same shape), written into b.
  Value add(Value lhs, Value rhs);
  /// LayerNorm over the last dim of x [M, D] with `prefix`.scale/.bias.
  Value layerNorm(Value x, const std::string &prefix);
  /// RMSNorm over the last dim of x [M, D] with `prefix`.scale.
  Value rmsNorm(Value x, const std::string &prefix);
  /// The model's norm (`norm`: layerNorm or rmsNorm).
  Value norm(Value x, const std::string &prefix);
  /// softmax(scores / sqrt(dh)) over the last dim (the keys).
  Value attentionWeights(Value scores, int64_t dh);
  /// fn(v) for every element of `input`.
  Value mapScalars(Value input,
                   function_ref<Value(OpBuilder &, Location, Value)> fn);

  static ArrayRef<int64_t> shape(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  }

private:
  /// Embedding.cpp: images -> patch rows [N*P, C*ps*ps].
  Value patchify(Value images);
  /// MoELayer.cpp: [E + 1] i32 routing statistics of one layer; choices of
  /// masked tokens count in neither.
  Value routingStats(Value ids, Value slots, int64_t e);
  /// Layers.cpp: (x - mean) / sqrt(mean((x - mean)^2) + eps) * scale
  /// (+ bias) per row of x [M, D], `prefix`.scale/.bias; `mean` [M] null
  /// for RMSNorm.
  Value normalizeRows(Value x, Value mean, const std::string &prefix,
                      bool withBias);
  /// Head.cpp: the class token, or the mean over tokens, [N*T, D] -> [N, D].
  Value pool(Value x);
  /// Head.cpp: multihead attention pooling (head "map"), [N*T, D] -> [N, D].
  Value mapPool(Value x);

protected:
  OpBuilder &b;
  Location loc;
  const ModelDescription &model;
  const BuildOptions &options;
  Value weights;
  /// Tokens (index) routed by every MoE layer: those of the valid images;
  /// the rest, padding at the end of the batch, is masked out.
  Value numValidTokens;
  /// The block whose MoE layer is being built (the noise counter's block).
  int64_t currentBlock = 0;
  /// Training graphs: the [3] loss means of each MoE layer, block order.
  SmallVector<Value> lossRows;
  Type f32;
  llvm::StringMap<WeightTensor> layout;
};

} // namespace mlir::vmoe::frontend

#endif // LIB_FRONTEND_FORWARDBUILDER_H
