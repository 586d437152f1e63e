//===- FuseExperts.cpp - vmoe-fuse-experts ----------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// dispatch -> expert_ffn -> combine  ==>  assign_slots + fused_experts.
// Expert weights from vmoe.unpack_panels (f32 panels packed at load) go to
// the fused op, vmoe.expert_choice_experts and vmoe.soft_moe as the panels
// themselves (`weight_panels = L`), so their GEMMs read them in place.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "vmoe/Dialect/VMoE/IR/VMoE.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEFUSEEXPERTSPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;
using namespace mlir::vmoe;

namespace {

/// Matches the chain from the combine and rebuilds it fused.
struct FuseDispatchExpertCombine : OpRewritePattern<CombineOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CombineOp combine,
                                PatternRewriter &rewriter) const override {
    Operation *ffn = combine.getExpertOutputs().getDefiningOp();
    auto mlp = dyn_cast_or_null<ExpertFFNOp>(ffn);
    auto swiglu = dyn_cast_or_null<ExpertSwiGLUOp>(ffn);
    if (!mlp && !swiglu)
      return rewriter.notifyMatchFailure(
          combine, "not fed by expert_ffn or expert_swiglu");
    if (!ffn->getResult(0).hasOneUse())
      return rewriter.notifyMatchFailure(combine,
                                         "expert outputs have other users");
    Value buffers = mlp ? mlp.getBuffers() : swiglu.getBuffers();
    auto dispatch = buffers.getDefiningOp<DispatchOp>();
    if (!dispatch)
      return rewriter.notifyMatchFailure(combine, "buffers not from dispatch");
    if (!dispatch.getBuffers().hasOneUse())
      return rewriter.notifyMatchFailure(combine, "buffers have other users");
    if (combine.getSlots() != dispatch.getSlots() ||
        combine.getExpertIds() != dispatch.getExpertIds())
      return rewriter.notifyMatchFailure(
          combine, "combine reads other ids or slots than the dispatch");
    auto buffersType = dispatch.getBuffers().getType();
    if (!buffersType.hasStaticShape() && buffersType.isDynamicDim(2))
      return rewriter.notifyMatchFailure(
          combine, "the capacity is not static (run vmoe-buffer-sizing)");
    int64_t e = buffersType.getDimSize(0), b = buffersType.getDimSize(2);
    if (ShapedType::isDynamic(b))
      return rewriter.notifyMatchFailure(combine, "dynamic capacity");
    auto xType = dispatch.getX().getType();
    if (combine.getOutput().getType() != xType)
      return rewriter.notifyMatchFailure(combine,
                                         "output type differs from x");

    if (swiglu && (ShapedType::isDynamic(e) ||
                   ShapedType::isDynamic(xType.getDimSize(2)) ||
                   swiglu.getWUp().getType().isDynamicDim(2)))
      return rewriter.notifyMatchFailure(
          combine, "gated experts need static E, D and H (zero biases)");

    Location loc = combine.getLoc();
    int64_t g = xType.getDimSize(0);
    Type i32 = rewriter.getI32Type();
    auto assign = AssignSlotsOp::create(
        rewriter, loc, dispatch.getSlots().getType(),
        RankedTensorType::get({e, g, b}, i32),
        RankedTensorType::get({e, g}, i32), dispatch.getExpertIds(),
        dispatch.getOrder(), dispatch.getRuntimeCapacity(),
        dispatch.getNumValid());
    // Weights stored in panel layout reach the fused op as panels, so its
    // lowering reads them in place (no repacking per call). Not for gated
    // experts (fused_experts-C5).
    UnpackPanelsOp unpack1, unpack2;
    IntegerAttr panelWidth;
    if (mlp) {
      unpack1 = mlp.getW1().getDefiningOp<UnpackPanelsOp>();
      unpack2 = mlp.getW2().getDefiningOp<UnpackPanelsOp>();
      if (unpack1 && unpack2) {
        int64_t l1 = unpack1.getPanels().getType().getShape().back();
        int64_t l2 = unpack2.getPanels().getType().getShape().back();
        if (l1 == l2 && !ShapedType::isDynamic(l1) &&
            unpack1.getStorage() == unpack2.getStorage())
          panelWidth = rewriter.getI64IntegerAttr(l1);
      }
    }
    FusedExpertsOp fused;
    if (mlp) {
      Value w1 = panelWidth ? unpack1.getPanels() : mlp.getW1();
      Value w2 = panelWidth ? unpack2.getPanels() : mlp.getW2();
      fused = FusedExpertsOp::create(
          rewriter, loc, xType, dispatch.getX(), assign.getSlots(),
          combine.getWeights(), assign.getSlotEntries(), assign.getFill(), w1,
          mlp.getB1(), w2, mlp.getB2(), /*w_up=*/Value(),
          mlp.getActivationAttr(), panelWidth,
          PanelStorageAttr::get(rewriter.getContext(),
                                panelWidth ? unpack1.getStorage()
                                           : PanelStorage::f32));
    } else {
      // SwiGLU: w1 = w_gate, w2 = w_down, act = silu, zero biases.
      auto upType = swiglu.getWUp().getType();
      int64_t h = upType.getDimSize(2), d = xType.getDimSize(2);
      auto zeros = [&](ArrayRef<int64_t> shape) {
        auto type = RankedTensorType::get(shape, upType.getElementType());
        return arith::ConstantOp::create(
            rewriter, loc, type,
            DenseElementsAttr::get(
                type, rewriter.getFloatAttr(upType.getElementType(), 0)));
      };
      fused = FusedExpertsOp::create(
          rewriter, loc, xType, dispatch.getX(), assign.getSlots(),
          combine.getWeights(), assign.getSlotEntries(), assign.getFill(),
          swiglu.getWGate(), zeros({e, h}), swiglu.getWDown(), zeros({e, d}),
          swiglu.getWUp(),
          ActivationAttr::get(rewriter.getContext(), Activation::silu),
          /*weight_panels=*/IntegerAttr(),
          PanelStorageAttr::get(rewriter.getContext(), PanelStorage::f32));
    }
    rewriter.replaceOp(combine, fused.getOutput());
    rewriter.eraseOp(ffn);
    if (panelWidth) {
      if (unpack1->use_empty())
        rewriter.eraseOp(unpack1);
      if (unpack2 != unpack1 && unpack2->use_empty())
        rewriter.eraseOp(unpack2);
    }
    rewriter.replaceAllUsesWith(dispatch.getSlots(), assign.getSlots());
    rewriter.eraseOp(dispatch);
    return success();
  }
};

/// The common panel width of `w1` and `w2` when both come from f32
/// vmoe.unpack_panels with one static width (nullopt otherwise).
static std::optional<int64_t> commonPanelWidth(Value w1, Value w2) {
  auto unpack1 = w1.getDefiningOp<UnpackPanelsOp>();
  auto unpack2 = w2.getDefiningOp<UnpackPanelsOp>();
  if (!unpack1 || !unpack2 || unpack1.getStorage() != PanelStorage::f32 ||
      unpack2.getStorage() != PanelStorage::f32)
    return std::nullopt;
  int64_t l1 = unpack1.getPanels().getType().getShape().back();
  int64_t l2 = unpack2.getPanels().getType().getShape().back();
  if (l1 != l2 || ShapedType::isDynamic(l1))
    return std::nullopt;
  return l1;
}

/// An expert choice or Soft MoE op whose w1 and w2 are unpacked f32 panels
/// reads the panels (`weight_panels = L`); the unpack ops left without
/// users are erased by the driver (they are pure). bf16 pair panels are
/// left alone: these ops have no bf16 GEMMs.
template <typename OpTy> struct FoldPanelsIntoExperts : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (op.getWeightPanels())
      return rewriter.notifyMatchFailure(op, "already reads panels");
    std::optional<int64_t> width = commonPanelWidth(op.getW1(), op.getW2());
    if (!width)
      return rewriter.notifyMatchFailure(
          op, "w1 and w2 are not f32 panels of one width");
    Value w1 = op.getW1().template getDefiningOp<UnpackPanelsOp>().getPanels();
    Value w2 = op.getW2().template getDefiningOp<UnpackPanelsOp>().getPanels();
    rewriter.modifyOpInPlace(op, [&] {
      op.getW1Mutable().assign(w1);
      op.getW2Mutable().assign(w2);
      op.setWeightPanelsAttr(rewriter.getI64IntegerAttr(*width));
    });
    return success();
  }
};

} // namespace

namespace mlir::vmoe {
namespace {

struct VMoEFuseExpertsPass
    : impl::VMoEFuseExpertsPassBase<VMoEFuseExpertsPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseDispatchExpertCombine,
                 FoldPanelsIntoExperts<ExpertChoiceExpertsOp>,
                 FoldPanelsIntoExperts<SoftMoEOp>>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::vmoe
