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

bool mlir::vmoe::frontend::isPanelPackedWeight(const ModelDescription &model,
                                               const BuildOptions &options,
                                               llvm::StringRef name,
                                               llvm::ArrayRef<int64_t> shape) {
  // Under expert parallelism a rank reads only its experts' rows of these
  // tensors; they stay plain (packing all experts would touch every page).
  if (options.target != "cpu" || options.expertParallel > 0 ||
      shape.size() != 3 ||
      shape[1] % kWeightPanelWidth != 0 || shape[2] % kWeightPanelWidth != 0)
    return false;
  for (int64_t block : model.moeBlocks()) {
    std::string prefix = "blocks." + std::to_string(block) + ".moe";
    if (name != prefix + ".w1" && name != prefix + ".w2")
      continue;
    return model.layerSettings(block).isTokenChoice();
  }
  return false;
}

/// The expert kernel `name` [E, K, N]: from its panels when stored packed.
Value ForwardBuilder::expertKernel(const std::string &name) {
  const WeightTensor &tensor = layout.at(name);
  if (!isPanelPackedWeight(model, options, name, tensor.shape))
    return weight(name);
  int64_t e = tensor.shape[0], k = tensor.shape[1], n = tensor.shape[2];
  int64_t l = kWeightPanelWidth;
  Value flat = tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get({tensor.numElements()}, f32), weights,
      ArrayRef<OpFoldResult>{b.getIndexAttr(tensor.offset)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(tensor.numElements())},
      unitStrides(b, 1));
  Value panels = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({e, n / l, k, l}, f32), flat,
      ArrayRef<ReassociationIndices>{{0, 1, 2, 3}});
  return UnpackPanelsOp::create(
      b, loc, RankedTensorType::get(tensor.shape, f32), panels);
}
