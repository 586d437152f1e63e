//===- WeightPanels.cpp - Which weights are stored as GEMM panels ---------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Constant weights packed once: the expert kernels of token choice MoE
// layers are stored in the weights buffer in the microkernel's panel layout
// ([E, N/L, K, L] for a [E, K, N] kernel; the runtime packs them at load,
// docs/ModelFormat.md §5) and reach vmoe.expert_ffn through
// vmoe.unpack_panels, which vmoe-fuse-experts folds into
// vmoe.fused_experts {weight_panels = L}: the GEMMs read them in place.
// With --precision=bf16 the runtime writes them as bf16 pair panels
// ([E, ceil(N/L), ceil(K/2), L] words of two bf16 of consecutive k) into the
// first words of their f32 regions, read through
// vmoe.unpack_panels {storage = bf16_pairs}.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Frontend/ModelBuilder.h"

#include "ForwardBuilder.h"

#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::frontend;

/// Whether `name` is an expert kernel (w1, w2) of a token choice MoE layer
/// that may be stored in panel layout (CPU target, one process).
static bool isPackableExpertKernel(const ModelDescription &model,
                                   const BuildOptions &options,
                                   llvm::StringRef name,
                                   llvm::ArrayRef<int64_t> shape) {
  // Under expert parallelism a rank reads only its experts' rows of these
  // tensors; they stay plain (packing all experts would touch every page).
  if (options.target != "cpu" || options.expertParallel > 0 ||
      shape.size() != 3)
    return false;
  for (int64_t block : model.moeBlocks()) {
    std::string prefix = "blocks." + std::to_string(block) + ".moe";
    if (name != prefix + ".w1" && name != prefix + ".w2")
      continue;
    return model.layerSettings(block).isTokenChoice();
  }
  return false;
}

int64_t mlir::vmoe::frontend::bf16PanelWords(llvm::ArrayRef<int64_t> shape,
                                             int64_t width) {
  int64_t k = shape[shape.size() - 2], n = shape.back();
  int64_t matrices = 1;
  for (int64_t dim : shape.drop_back(2))
    matrices *= dim;
  return matrices * ((n + width - 1) / width) * width * ((k + 1) / 2);
}

bool mlir::vmoe::frontend::isBF16PanelWeight(const ModelDescription &model,
                                             const BuildOptions &options,
                                             llvm::StringRef name,
                                             llvm::ArrayRef<int64_t> shape) {
  if (options.precision != "bf16" ||
      !isPackableExpertKernel(model, options, name, shape))
    return false;
  // Both kernels of the layer ([E, D, He] and [E, He, D]) or neither, so
  // that vmoe-fuse-experts hands both to the fused op.
  int64_t e = shape[0], k = shape[1], n = shape[2];
  auto fits = [&](int64_t rows, int64_t columns) {
    return bf16PanelWords({e, rows, columns}, kWeightPanelWidth) <=
           e * rows * columns;
  };
  return fits(k, n) && fits(n, k);
}

bool mlir::vmoe::frontend::isPanelPackedWeight(const ModelDescription &model,
                                               const BuildOptions &options,
                                               llvm::StringRef name,
                                               llvm::ArrayRef<int64_t> shape) {
  if (isBF16PanelWeight(model, options, name, shape))
    return true;
  return isPackableExpertKernel(model, options, name, shape) &&
         shape[1] % kWeightPanelWidth == 0 && shape[2] % kWeightPanelWidth == 0;
}

/// The expert kernel `name` [E, K, N]: from its panels when stored packed.
Value ForwardBuilder::expertKernel(const std::string &name) {
  const WeightTensor &tensor = layout.at(name);
  if (!isPanelPackedWeight(model, options, name, tensor.shape))
    return weight(name);
  int64_t e = tensor.shape[0], k = tensor.shape[1], n = tensor.shape[2];
  int64_t l = kWeightPanelWidth;
  bool bf16 = isBF16PanelWeight(model, options, name, tensor.shape);
  // bf16 pairs: ceil(K/2) rows of words per panel, the words first in the
  // region.
  int64_t rows = bf16 ? (k + 1) / 2 : k, panels = (n + l - 1) / l;
  int64_t words = e * panels * rows * l;
  Value flat = tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get({words}, f32), weights,
      ArrayRef<OpFoldResult>{b.getIndexAttr(tensor.offset)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(words)}, unitStrides(b, 1));
  Value packed = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({e, panels, rows, l}, f32), flat,
      ArrayRef<ReassociationIndices>{{0, 1, 2, 3}});
  return UnpackPanelsOp::create(
      b, loc, RankedTensorType::get(tensor.shape, f32), packed,
      bf16 ? PanelStorage::bf16_pairs : PanelStorage::f32);
}
