//===- FuseExperts.cpp - vmoe-fuse-experts ----------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// dispatch -> expert_ffn -> combine  ==>  assign_slots + fused_experts.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "vmoe/Dialect/VMoE/IR/VMoE.h"

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
    auto ffn = combine.getExpertOutputs().getDefiningOp<ExpertFFNOp>();
    if (!ffn)
      return rewriter.notifyMatchFailure(combine, "not fed by expert_ffn");
    if (!ffn.getOutput().hasOneUse())
      return rewriter.notifyMatchFailure(combine,
                                         "expert outputs have other users");
    auto dispatch = ffn.getBuffers().getDefiningOp<DispatchOp>();
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
    // lowering reads them in place (no repacking per call).
    Value w1 = ffn.getW1(), w2 = ffn.getW2();
    IntegerAttr panelWidth;
    auto unpack1 = w1.getDefiningOp<UnpackPanelsOp>();
    auto unpack2 = w2.getDefiningOp<UnpackPanelsOp>();
    if (unpack1 && unpack2) {
      int64_t l1 = unpack1.getPanels().getType().getShape().back();
      int64_t l2 = unpack2.getPanels().getType().getShape().back();
      if (l1 == l2 && !ShapedType::isDynamic(l1)) {
        w1 = unpack1.getPanels();
        w2 = unpack2.getPanels();
        panelWidth = rewriter.getI64IntegerAttr(l1);
      }
    }
    auto fused = FusedExpertsOp::create(
        rewriter, loc, xType, dispatch.getX(), assign.getSlots(),
        combine.getWeights(), assign.getSlotEntries(), assign.getFill(), w1,
        ffn.getB1(), w2, ffn.getB2(), ffn.getActivationAttr(), panelWidth);
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

} // namespace

namespace mlir::vmoe {
namespace {

struct VMoEFuseExpertsPass
    : impl::VMoEFuseExpertsPassBase<VMoEFuseExpertsPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseDispatchExpertCombine>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::vmoe
