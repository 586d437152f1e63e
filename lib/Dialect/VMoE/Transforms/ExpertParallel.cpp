//===- ExpertParallel.cpp - vmoe-expert-parallel ----------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// dispatch -> expert_ffn -> combine  ==>  dispatch -> exchange_dispatch ->
// expert_ffn(expert_shard(weights)) -> exchange_combine -> combine.
// The layers are numbered in the order of their combines in the function.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Support/Limits.h"
#include "vmoe/Support/OptionChecks.h"
#include "vmoe/Support/PassOptionChecks.h"

#include "mlir/IR/Builders.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEEXPERTPARALLELPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;
using namespace mlir::vmoe;

/// The rank's shard of an expert weight `w` (`E x ...`).
static Value shard(OpBuilder &b, Location loc, Value w, int64_t ranks) {
  auto type = cast<RankedTensorType>(w.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[0] /= ranks;
  return ExpertShardOp::create(b, loc,
                               RankedTensorType::get(shape,
                                                     type.getElementType()),
                               w, static_cast<uint64_t>(ranks));
}

/// Rewrites one chain; `layer` numbers it.
static LogicalResult rewriteChain(ExpertFFNOp ffn, DispatchOp dispatch,
                                  int64_t ranks, int64_t layer) {
  auto buffersType = dispatch.getBuffers().getType();
  int64_t e = buffersType.getDimSize(0), g = buffersType.getDimSize(1);
  if (e % ranks != 0)
    return dispatch.emitOpError("expert parallelism: ")
           << e << " experts are not divisible by " << ranks << " ranks";
  OpBuilder b(ffn);
  Location loc = ffn.getLoc();
  auto expertSide = RankedTensorType::get(
      {e / ranks, ShapedType::isDynamic(g) ? ShapedType::kDynamic : ranks * g,
       buffersType.getDimSize(2), buffersType.getDimSize(3)},
      buffersType.getElementType());
  auto ranksAttr = static_cast<uint64_t>(ranks);
  auto layerAttr = static_cast<uint64_t>(layer);
  Value rows = ExchangeDispatchOp::create(
      b, loc, expertSide, ffn.getBuffers(), dispatch.getExpertIds(),
      dispatch.getSlots(), ranksAttr, layerAttr);
  // One statement each: the shards appear in operand order.
  Value w1 = shard(b, loc, ffn.getW1(), ranks);
  Value b1 = shard(b, loc, ffn.getB1(), ranks);
  Value w2 = shard(b, loc, ffn.getW2(), ranks);
  Value b2 = shard(b, loc, ffn.getB2(), ranks);
  Value y = ExpertFFNOp::create(b, loc, expertSide, rows, w1, b1, w2, b2,
                                ffn.getActivationAttr());
  Value back = ExchangeCombineOp::create(b, loc, buffersType, y,
                                         dispatch.getExpertIds(),
                                         dispatch.getSlots(), ranksAttr,
                                         layerAttr);
  ffn.getOutput().replaceAllUsesWith(back);
  ffn.erase();
  return success();
}

namespace mlir::vmoe {
namespace {

struct VMoEExpertParallelPass
    : PassWithCheckedOptions<
          VMoEExpertParallelPass,
          impl::VMoEExpertParallelPassBase<VMoEExpertParallelPass>> {
  using PassWithCheckedOptions::PassWithCheckedOptions;

  /// A count of processes, a size of the IR (vmoe-C2).
  llvm::Error checkOptions() {
    return ::vmoe::checkRange("ranks", ranks, 1,
                              ::vmoe::limits::kMaxDimension);
  }

  void runOnOperation() override {
    if (failed(verifyOptions()))
      return signalPassFailure();
    // Layer families that keep their experts in one op.
    WalkResult unsupported = getOperation()->walk([&](Operation *op) {
      if (isa<ExpertChoiceOp, ExpertChoiceExpertsOp, SoftMoEOp,
              FusedExpertsOp>(op)) {
        op->emitOpError("is not supported under expert parallelism (token "
                        "choice layers only; run vmoe-expert-parallel before "
                        "vmoe-fuse-experts)");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (unsupported.wasInterrupted())
      return signalPassFailure();

    SmallVector<ExpertFFNOp> ffns;
    getOperation()->walk([&](ExpertFFNOp ffn) { ffns.push_back(ffn); });
    int64_t layer = 0;
    for (ExpertFFNOp ffn : ffns) {
      auto dispatch = ffn.getBuffers().getDefiningOp<DispatchOp>();
      CombineOp combine;
      if (ffn.getOutput().hasOneUse())
        combine = dyn_cast<CombineOp>(*ffn.getOutput().getUsers().begin());
      // Anything else (the front end's dense MLPs are one-expert
      // expert_ffn ops on local rows) runs on every rank as it is.
      if (!dispatch || !combine ||
          combine.getExpertIds() != dispatch.getExpertIds() ||
          combine.getSlots() != dispatch.getSlots())
        continue;
      if (failed(rewriteChain(ffn, dispatch, ranks, layer++)))
        return signalPassFailure();
    }
  }
};

} // namespace
} // namespace mlir::vmoe
