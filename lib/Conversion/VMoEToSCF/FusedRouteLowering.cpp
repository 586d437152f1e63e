//===- FusedRouteLowering.cpp - Lower fused_route ---------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe.fused_route -> an scf.forall over routing groups whose body routes
// one group with route, bpr_sort and assign_slots on `1 x S` slices. Those
// ops are lowered by their own patterns in the same conversion, so results
// are bit for bit those of the unfused chain, while the gates, scores and
// order of a group exist only for that group (a cache-sized working set per
// iteration instead of G x S x E tensors).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "Patterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::lowering;

/// `type` with its dim `dim` set to 1 (one routing group).
static RankedTensorType oneGroup(Type type, unsigned dim) {
  auto ranked = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(ranked.getShape());
  shape[dim] = 1;
  return ranked.clone(shape);
}

/// Offsets and sizes of group g along dim `dim` of a tensor.
static std::pair<SmallVector<OpFoldResult>, SmallVector<OpFoldResult>>
groupSlice(OpBuilder &b, Location loc, Value tensor, unsigned dim, Value g) {
  SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, tensor);
  SmallVector<OpFoldResult> offsets(sizes.size(), b.getIndexAttr(0));
  offsets[dim] = g;
  sizes[dim] = b.getIndexAttr(1);
  return {offsets, sizes};
}

namespace {

struct FusedRouteOpLowering : OpConversionPattern<FusedRouteOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(FusedRouteOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value x = adaptor.getX();
    SmallVector<Value> inits;
    for (Value result : op.getResults())
      inits.push_back(emptyTensor(b, loc, mixedSizes(b, loc, result),
                                  getElementTypeOrSelf(result.getType())));
    // Dim of the group in each result: ids, weights, slots are G x S x k,
    // slot entries E x G x B, fill E x G.
    const unsigned groupDim[] = {0, 0, 0, 1, 1};
    auto forall = buildForall(
        b, loc, {mixedSizes(b, loc, x)[0]}, inits,
        [&](OpBuilder &b, Location loc, ValueRange ivs,
            ValueRange) -> SmallVector<ParallelInsert> {
          Value g = ivs[0];
          auto [xOffsets, xSizes] = groupSlice(b, loc, x, 0, g);
          Value xg = tensor::ExtractSliceOp::create(
              b, loc, oneGroup(x.getType(), 0), x, xOffsets, xSizes,
              unitStrides(b, 3));
          auto route = RouteOp::create(b, loc, xg, adaptor.getRouter(),
                                       static_cast<int64_t>(op.getK()),
                                       op.getOrder(), op.getNormalize());
          Value order;
          if (std::optional<PriorityScore> priority = op.getPriority()) {
            std::optional<int64_t> scoreK;
            if (std::optional<uint64_t> k = op.getScoreK())
              scoreK = static_cast<int64_t>(*k);
            order = BPRSortOp::create(b, loc, route.getGates(), *priority,
                                      scoreK);
          }
          // Token t of this one-group slice is token g * S + t of all.
          Value numValid = adaptor.getNumValid();
          if (numValid)
            numValid = arith::SubIOp::create(
                b, loc, numValid,
                arith::MulIOp::create(b, loc, g,
                                      tensor::DimOp::create(b, loc, x, 1)));
          auto assign = AssignSlotsOp::create(
              b, loc, route.getExpertIds().getType(),
              oneGroup(op.getSlotEntries().getType(), 1),
              oneGroup(op.getFill().getType(), 1), route.getExpertIds(),
              order, adaptor.getRuntimeCapacity(), numValid);
          SmallVector<Value> parts = {route.getExpertIds(), route.getWeights(),
                                      assign.getSlots(),
                                      assign.getSlotEntries(),
                                      assign.getFill()};
          SmallVector<ParallelInsert> inserts;
          for (auto [i, part] : llvm::enumerate(parts)) {
            auto [offsets, sizes] = groupSlice(b, loc, part, groupDim[i], g);
            inserts.push_back({part, static_cast<unsigned>(i), offsets, sizes});
          }
          return inserts;
        });
    rewriter.replaceOp(op, forall.getResults());
    return success();
  }
};

} // namespace

void mlir::vmoe::lowering::populateFusedRouteLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<FusedRouteOpLowering>(patterns.getContext());
}
