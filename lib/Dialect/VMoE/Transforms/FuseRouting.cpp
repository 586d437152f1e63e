//===- FuseRouting.cpp - vmoe-fuse-routing ----------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// route -> [bpr_sort] -> assign_slots  ==>  fused_route, placed at the
// route so that uses of the route's results before the assign_slots (expert
// statistics, a second dispatch) stay dominated.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "vmoe/Dialect/VMoE/IR/VMoE.h"

#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEFUSEROUTINGPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;
using namespace mlir::vmoe;

namespace {

struct FuseRouteOrderAssign : OpRewritePattern<AssignSlotsOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AssignSlotsOp assign,
                                PatternRewriter &rewriter) const override {
    auto route = assign.getExpertIds().getDefiningOp<RouteOp>();
    if (!route)
      return rewriter.notifyMatchFailure(assign, "ids not from vmoe.route");
    if (route.getNoise())
      return rewriter.notifyMatchFailure(assign, "router with training noise");
    BPRSortOp sort;
    if (Value order = assign.getOrder()) {
      sort = order.getDefiningOp<BPRSortOp>();
      if (!sort || sort.getGates() != route.getGates())
        return rewriter.notifyMatchFailure(
            assign, "order is not a bpr_sort of the router's gates");
      if (!order.hasOneUse())
        return rewriter.notifyMatchFailure(assign, "order has other users");
    }
    for (Operation *user : route.getGates().getUsers())
      if (user != sort.getOperation())
        return rewriter.notifyMatchFailure(assign, "gates have other users");

    // The fused op replaces the route's ids and weights everywhere, so it
    // must dominate their uses: it goes at the route when the capacity and
    // valid-count operands are available there, else at the assign_slots
    // when no use of the route's results comes before it; otherwise the
    // rewrite is refused.
    Operation *insertionPoint = route;
    DominanceInfo dominance(route->getParentOp());
    for (Value operand : {assign.getRuntimeCapacity(), assign.getNumValid()})
      if (operand && !dominance.properlyDominates(operand, route))
        insertionPoint = assign;
    if (insertionPoint == assign.getOperation()) {
      for (Value result : {route.getExpertIds(), route.getWeights()})
        for (Operation *user : result.getUsers())
          if (user != assign.getOperation() &&
              !dominance.properlyDominates(assign.getOperation(), user))
            return rewriter.notifyMatchFailure(
                assign, "a use of the route comes before the capacity");
    }

    std::optional<PriorityScore> priority;
    IntegerAttr scoreK;
    if (sort) {
      priority = sort.getScore();
      scoreK = sort.getKAttr();
    }
    rewriter.setInsertionPoint(insertionPoint);
    auto fused = FusedRouteOp::create(
        rewriter, assign.getLoc(),
        TypeRange{route.getExpertIds().getType(), route.getWeights().getType(),
                  assign.getSlots().getType(),
                  assign.getSlotEntries().getType(), assign.getFill().getType()},
        route.getX(), route.getRouter(), assign.getRuntimeCapacity(),
        assign.getNumValid(), route.getKAttr(), route.getNormalizeAttr(), route.getOrderAttr(),
        priority ? PriorityScoreAttr::get(getContext(), *priority)
                 : PriorityScoreAttr(),
        scoreK);
    rewriter.replaceOp(assign, {fused.getSlots(), fused.getSlotEntries(),
                                fused.getFill()});
    if (sort)
      rewriter.eraseOp(sort);
    rewriter.replaceAllUsesWith(route.getExpertIds(), fused.getExpertIds());
    rewriter.replaceAllUsesWith(route.getWeights(), fused.getWeights());
    rewriter.eraseOp(route);
    return success();
  }
};

} // namespace

namespace mlir::vmoe {
namespace {

struct VMoEFuseRoutingPass
    : impl::VMoEFuseRoutingPassBase<VMoEFuseRoutingPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseRouteOrderAssign>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::vmoe
