//===- WeightPanels.cpp - Which weights are stored as GEMM panels ---------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Constant weights packed once: the expert kernels of MoE layers (token
// choice, expert choice, Soft MoE) and the dense kernels are stored in the
// weights buffer in the
// microkernel's panel layout ([..., N/L, K, L] for a [..., K, N] kernel;
// the runtime packs them at load, docs/ModelFormat.md §5) and reach their
// GEMMs through vmoe.unpack_panels, which vmoe-fuse-experts folds into
// vmoe.fused_experts, vmoe.expert_choice_experts and vmoe.soft_moe
// {weight_panels = L} and convert-vmoe-to-scf into the
// linalg contractions of the dense layers: the GEMMs read them in place.
// With --precision=bf16 the runtime writes the expert kernels and the
// panel-packed dense kernels as bf16 pair panels ([..., ceil(N/L),
// ceil(K/2), L] words of two bf16 of consecutive k) into the first words of
// their f32 regions, read through vmoe.unpack_panels {storage = bf16_pairs}
// (folded into fused_experts, and into the dense contractions by
// convert-vmoe-to-scf).
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

/// The settings of the MoE layer whose expert kernel (w1, w2) `name` is,
/// when it may be stored in panel layout (CPU target, one process).
static std::optional<MoESettings>
packableExpertKernelLayer(const ModelDescription &model,
                          const BuildOptions &options, llvm::StringRef name,
                          llvm::ArrayRef<int64_t> shape) {
  // Under expert parallelism a rank reads only its experts' rows of these
  // tensors; they stay plain (packing all experts would touch every page).
  if (options.target != "cpu" || options.expertParallel > 0 ||
      shape.size() != 3)
    return std::nullopt;
  for (int64_t block : model.moeBlocks()) {
    std::string prefix = "blocks." + std::to_string(block) + ".moe";
    if (name == prefix + ".w1" || name == prefix + ".w2")
      return model.layerSettings(block);
  }
  return std::nullopt;
}

/// Whether `name` is an expert kernel (w1, w2) of a token choice MoE layer
/// that may be stored in panel layout (CPU target, one process).
static bool isPackableExpertKernel(const ModelDescription &model,
                                   const BuildOptions &options,
                                   llvm::StringRef name,
                                   llvm::ArrayRef<int64_t> shape) {
  std::optional<MoESettings> layer =
      packableExpertKernelLayer(model, options, name, shape);
  return layer && layer->isTokenChoice();
}

/// Whether `name` is an expert kernel (w1, w2) of an expert choice or Soft
/// MoE layer that may be stored in panel layout (CPU target, one process):
/// vmoe-fuse-experts hands the panels to vmoe.expert_choice_experts and
/// vmoe.soft_moe, whose GEMMs read them in place. f32 only (no bf16 GEMMs).
static bool isPackableFamilyExpertKernel(const ModelDescription &model,
                                         const BuildOptions &options,
                                         llvm::StringRef name,
                                         llvm::ArrayRef<int64_t> shape) {
  std::optional<MoESettings> layer =
      packableExpertKernelLayer(model, options, name, shape);
  return layer &&
         (layer->routing == "expert_choice" || layer->routing == "soft");
}

/// Whether `name` is a dense kernel [K, N] stored in panel layout (CPU
/// target): patch embedding, attention projections, dense MLPs,
/// pre-logits, head and the MAP head's layers, every `.kernel` the GEMMs
/// multiply by but the routers, which vmoe.route reads by columns, when N
/// is a multiple of the panel width.
static bool isPackableDenseKernel(const BuildOptions &options,
                                  llvm::StringRef name,
                                  llvm::ArrayRef<int64_t> shape) {
  return options.target == "cpu" && shape.size() == 2 &&
         shape.back() % kWeightPanelWidth == 0 && name.ends_with(".kernel") &&
         !name.ends_with(".router.kernel");
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
  if (options.precision != "bf16")
    return false;
  // Dense kernels: N a multiple of L, so their ceil(K/2) rows of words fit.
  if (isPackableDenseKernel(options, name, shape))
    return true;
  if (!isPackableExpertKernel(model, options, name, shape))
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
  if (shape.size() == 2)
    return isPackableDenseKernel(options, name, shape);
  if (options.target != "cpu" || shape.back() % kWeightPanelWidth != 0)
    return false;
  return (isPackableExpertKernel(model, options, name, shape) ||
          isPackableFamilyExpertKernel(model, options, name, shape)) &&
         shape[1] % kWeightPanelWidth == 0;
}

int64_t mlir::vmoe::frontend::weightPanelWidth(const ModelDescription &model,
                                               const BuildOptions &options,
                                               llvm::StringRef name,
                                               llvm::ArrayRef<int64_t> shape) {
  if (shape.size() == 3 && shape[1] % kExpertPanelWidth == 0 &&
      shape[2] % kExpertPanelWidth == 0 &&
      !isBF16PanelWeight(model, options, name, shape) &&
      isPackableExpertKernel(model, options, name, shape))
    return kExpertPanelWidth;
  return kWeightPanelWidth;
}

/// The kernel `name` [..., K, N] as a tensor of `shape` (its shape, with
/// leading unit dims when asked): through vmoe.unpack_panels of its panels
/// when stored packed.
Value ForwardBuilder::kernel(const std::string &name,
                             ArrayRef<int64_t> shape) {
  const WeightTensor &tensor = layout.at(name);
  SmallVector<int64_t> asShape(shape.empty() ? ArrayRef(tensor.shape) : shape);
  auto reshape = [&](Value v, ArrayRef<int64_t> newShape) {
    auto type = RankedTensorType::get(newShape, f32);
    if (v.getType() == type)
      return v;
    ReassociationIndices all;
    for (size_t i = 0; i < newShape.size(); ++i)
      all.push_back(i);
    return Value(tensor::ExpandShapeOp::create(
        b, loc, type, v, ArrayRef<ReassociationIndices>{all}));
  };
  Value flat = flatWeight(name);
  if (!isPanelPackedWeight(model, options, name, tensor.shape))
    return reshape(flat, asShape);
  int64_t k = tensor.shape[tensor.shape.size() - 2], n = tensor.shape.back();
  int64_t l = weightPanelWidth(model, options, name, tensor.shape);
  if (isBF16PanelWeight(model, options, name, tensor.shape)) {
    // bf16 pairs: ceil(K/2) rows of words per panel, the words first in the
    // region.
    SmallVector<int64_t> pairsShape(ArrayRef(asShape).drop_back(2));
    pairsShape.append({(n + l - 1) / l, (k + 1) / 2, l});
    int64_t words = 1;
    for (int64_t dim : pairsShape)
      words *= dim;
    Value pairs = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({words}, f32), flat,
        ArrayRef<OpFoldResult>{b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(words)}, unitStrides(b, 1));
    return UnpackPanelsOp::create(b, loc, RankedTensorType::get(asShape, f32),
                                  reshape(pairs, pairsShape),
                                  PanelStorage::bf16_pairs);
  }
  SmallVector<int64_t> panelsShape(ArrayRef(asShape).drop_back(2));
  panelsShape.append({n / l, k, l});
  return UnpackPanelsOp::create(b, loc, RankedTensorType::get(asShape, f32),
                                reshape(flat, panelsShape), PanelStorage::f32);
}

Value ForwardBuilder::kernelColumns(const std::string &name, int64_t first,
                                    int64_t count) {
  const WeightTensor &tensor = layout.at(name);
  int64_t k = tensor.shape[0], n = tensor.shape[1], l = kWeightPanelWidth;
  assert(tensor.shape.size() == 2 && first >= 0 && first + count <= n &&
         "columns of a 2-D kernel");
  bool packed = isPanelPackedWeight(model, options, name, tensor.shape);
  if (!packed || first % l != 0 || count % l != 0) {
    Value w = kernel(name);
    return tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({k, count}, f32), w,
        ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(first)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(k), b.getIndexAttr(count)},
        unitStrides(b, 2));
  }
  // The panels [N/L, rows, L] (rows: K, or ceil(K/2) words of bf16 pairs)
  // of the columns: a range of the leading dim, contiguous in the buffer.
  bool pairs = isBF16PanelWeight(model, options, name, tensor.shape);
  int64_t rows = pairs ? (k + 1) / 2 : k;
  int64_t panels = n / l, floats = panels * rows * l;
  Value flat = flatWeight(name);
  if (pairs)
    flat = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({floats}, f32), flat,
        ArrayRef<OpFoldResult>{b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(floats)}, unitStrides(b, 1));
  Value all = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({panels, rows, l}, f32), flat,
      ArrayRef<ReassociationIndices>{{0, 1, 2}});
  Value range = tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get({count / l, rows, l}, f32), all,
      ArrayRef<OpFoldResult>{b.getIndexAttr(first / l), b.getIndexAttr(0),
                             b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(count / l), b.getIndexAttr(rows),
                             b.getIndexAttr(l)},
      unitStrides(b, 3));
  return UnpackPanelsOp::create(
      b, loc, RankedTensorType::get({k, count}, f32), range,
      pairs ? PanelStorage::bf16_pairs : PanelStorage::f32);
}
