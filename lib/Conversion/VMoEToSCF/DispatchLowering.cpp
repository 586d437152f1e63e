//===- DispatchLowering.cpp - Lower dispatch and combine --------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe.dispatch becomes an scf.forall over groups whose sequential body
// fills the buffers choice by choice in priority order (so every top-1
// choice is placed before any top-2 choice); vmoe.combine becomes an
// scf.forall over tokens that adds the kept choices in choice order. Both
// have exactly one writer per output element, so results do not depend on
// the schedule or the thread count.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "Patterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::lowering;

/// lo <= v < hi for index values (signed).
static Value inRange(OpBuilder &b, Location loc, Value v, Value lo, Value hi) {
  using P = arith::CmpIPredicate;
  return arith::AndIOp::create(b, loc,
                               arith::CmpIOp::create(b, loc, P::sge, v, lo),
                               arith::CmpIOp::create(b, loc, P::slt, v, hi));
}

/// An i32 tensor element as an index.
static Value extractIndex(OpBuilder &b, Location loc, Value tensor,
                          ValueRange indices) {
  Value v = tensor::ExtractOp::create(b, loc, tensor, indices);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}

namespace {

/// vmoe.dispatch -> buffers filled per group, choice by choice.
struct DispatchOpLowering : OpConversionPattern<DispatchOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(DispatchOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value x = adaptor.getX(), ids = adaptor.getExpertIds();
    Value order = adaptor.getOrder();
    Type elementType = op.getX().getType().getElementType();
    int64_t numExperts = op.getNumExperts(), k = op.getNumChoices();
    SmallVector<OpFoldResult> xSizes = mixedSizes(b, loc, x);

    // The static (maximum) capacity: the attribute, the static result dim,
    // or the capacity rule evaluated on the runtime S.
    OpFoldResult capacity;
    int64_t bDim = op.getBuffers().getType().getDimSize(2);
    if (std::optional<uint64_t> attr = op.getCapacity())
      capacity = b.getIndexAttr(static_cast<int64_t>(*attr));
    else if (!ShapedType::isDynamic(bDim))
      capacity = b.getIndexAttr(bDim);
    else
      capacity = buildCapacityValue(
          b, loc, k, tensor::DimOp::create(b, loc, x, 1),
          floatConst(b, loc, b.getF64Type(),
                     op.getCapacityRatioAttr().getValueAsDouble()),
          numExperts, op.getCapacityRule(),
          static_cast<int64_t>(op.getMultipleOf()));
    Value limit = getValueOrCreateConstantIndexOp(b, loc, capacity);
    if (Value runtime = adaptor.getRuntimeCapacity())
      limit = arith::MinSIOp::create(b, loc, runtime, limit);

    SmallVector<OpFoldResult> bufferSizes = {b.getIndexAttr(numExperts),
                                             xSizes[0], capacity, xSizes[2]};
    Value buffers =
        filledTensor(b, loc, bufferSizes, floatConst(b, loc, elementType, 0));
    Value slots = emptyTensor(b, loc, {xSizes[0], xSizes[1], b.getIndexAttr(k)},
                              b.getI32Type());
    Value s = tensor::DimOp::create(b, loc, x, 1);
    Value zero = indexConst(b, loc, 0), one = indexConst(b, loc, 1);
    Value experts = indexConst(b, loc, numExperts);
    Value lastToken = arith::SubIOp::create(b, loc, s, one);

    auto forall = buildForall(
        b, loc, {xSizes[0]}, {buffers, slots},
        [&](OpBuilder &b, Location loc, ValueRange ivs,
            ValueRange outs) -> SmallVector<ParallelInsert> {
          Value g = ivs[0];
          SmallVector<OpFoldResult> groupOffsets = {b.getIndexAttr(0), g,
                                                    b.getIndexAttr(0),
                                                    b.getIndexAttr(0)};
          SmallVector<OpFoldResult> groupSizes = {b.getIndexAttr(numExperts),
                                                  b.getIndexAttr(1), capacity,
                                                  xSizes[2]};
          Value groupBuffers = tensor::ExtractSliceOp::create(
              b, loc, outs[0], groupOffsets, groupSizes, unitStrides(b, 4));
          SmallVector<OpFoldResult> slotOffsets = {g, b.getIndexAttr(0),
                                                   b.getIndexAttr(0)};
          SmallVector<OpFoldResult> slotSizes = {b.getIndexAttr(1), xSizes[1],
                                                 b.getIndexAttr(k)};
          Value groupSlots = tensor::ExtractSliceOp::create(
              b, loc, outs[1], slotOffsets, slotSizes, unitStrides(b, 3));
          Value fill = filledTensor(b, loc, {b.getIndexAttr(numExperts)},
                                    i32Const(b, loc, 0));

          ValueRange filled = buildLoop(
              b, loc, indexConst(b, loc, k), {groupBuffers, groupSlots, fill},
              [&](OpBuilder &b, Location loc, Value i,
                  ValueRange state) -> SmallVector<Value> {
                ValueRange next = buildLoop(
                    b, loc, s, state,
                    [&](OpBuilder &b, Location loc, Value p,
                        ValueRange state) -> SmallVector<Value> {
                      return placeChoice(b, loc, x, ids, order, g, p, i,
                                         lastToken, zero, experts, limit,
                                         state);
                    });
                return SmallVector<Value>(next);
              });
          return {{filled[0], 0, groupOffsets, groupSizes},
                  {filled[1], 1, slotOffsets, slotSizes}};
        });
    rewriter.replaceOp(op, forall.getResults());
    return success();
  }

  /// Places choice i of the token at priority position p; `state` is
  /// (buffers of the group, slots of the group, fill per expert).
  static SmallVector<Value> placeChoice(OpBuilder &b, Location loc, Value x,
                                        Value ids, Value order, Value g,
                                        Value p, Value i, Value lastToken,
                                        Value zero, Value experts, Value limit,
                                        ValueRange state) {
    Value groupBuffers = state[0], groupSlots = state[1], fill = state[2];
    // The token; an out-of-range order entry is clamped, never followed.
    Value t = p;
    if (order) {
      t = extractIndex(b, loc, order, {g, p});
      t = arith::MaxSIOp::create(b, loc,
                                 arith::MinSIOp::create(b, loc, t, lastToken),
                                 zero);
    }
    // The expert; ids outside [0, E) are dropped.
    Value e = extractIndex(b, loc, ids, {g, t, i});
    Value valid = inRange(b, loc, e, zero, experts);
    e = arith::SelectOp::create(b, loc, valid, e, zero);
    Value f32 = tensor::ExtractOp::create(b, loc, fill, ValueRange{e});
    Value f = arith::IndexCastOp::create(b, loc, b.getIndexType(), f32);
    Value kept = arith::AndIOp::create(
        b, loc, valid,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, f, limit));
    Value slot =
        arith::SelectOp::create(b, loc, kept, f32, i32Const(b, loc, -1));
    groupSlots = tensor::InsertOp::create(b, loc, slot, groupSlots,
                                          ValueRange{zero, t, i});
    auto ifOp = scf::IfOp::create(
        b, loc, kept,
        [&](OpBuilder &b, Location loc) {
          Value next = arith::AddIOp::create(b, loc, f32, i32Const(b, loc, 1));
          Value newFill =
              tensor::InsertOp::create(b, loc, next, fill, ValueRange{e});
          OpFoldResult d = mixedSizes(b, loc, x)[2];
          Value row = extractRow(b, loc, x, {g, t}, d);
          SmallVector<OpFoldResult> at = {e, b.getIndexAttr(0), f};
          Value dest = extractRow(b, loc, groupBuffers, at, d);
          Value copied =
              linalg::CopyOp::create(b, loc, ValueRange{row}, ValueRange{dest})
                  .getResult(0);
          Value newBuffers = insertRow(b, loc, copied, groupBuffers, at, d);
          scf::YieldOp::create(b, loc, ValueRange{newBuffers, newFill});
        },
        [&](OpBuilder &b, Location loc) {
          scf::YieldOp::create(b, loc, ValueRange{groupBuffers, fill});
        });
    return {ifOp.getResult(0), groupSlots, ifOp.getResult(1)};
  }
};

/// vmoe.combine -> per token, the gate-weighted sum of its kept choices.
struct CombineOpLowering : OpConversionPattern<CombineOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(CombineOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value y = adaptor.getExpertOutputs(), ids = adaptor.getExpertIds();
    Value slots = adaptor.getSlots(), weights = adaptor.getWeights();
    Type elementType = op.getOutput().getType().getElementType();
    SmallVector<OpFoldResult> ySizes = mixedSizes(b, loc, y);
    SmallVector<OpFoldResult> idSizes = mixedSizes(b, loc, ids);
    OpFoldResult d = ySizes[3];
    Value out = emptyTensor(b, loc, {idSizes[0], idSizes[1], d}, elementType);
    Value k = tensor::DimOp::create(b, loc, ids, 2);
    Value experts = tensor::DimOp::create(b, loc, y, 0);
    Value capacity = tensor::DimOp::create(b, loc, y, 2);
    Value zero = indexConst(b, loc, 0);

    auto forall = buildForall(
        b, loc, {idSizes[0], idSizes[1]}, {out},
        [&](OpBuilder &b, Location loc, ValueRange ivs,
            ValueRange outs) -> SmallVector<ParallelInsert> {
          Value g = ivs[0], t = ivs[1];
          Value row = extractRow(b, loc, outs[0], {g, t}, d);
          row = linalg::FillOp::create(
                    b, loc, ValueRange{floatConst(b, loc, elementType, 0)},
                    ValueRange{row})
                    .getResult(0);
          row = buildLoop(
              b, loc, k, {row},
              [&](OpBuilder &b, Location loc, Value i,
                  ValueRange acc) -> SmallVector<Value> {
                Value slot = extractIndex(b, loc, slots, {g, t, i});
                Value e = extractIndex(b, loc, ids, {g, t, i});
                Value kept = arith::AndIOp::create(
                    b, loc, inRange(b, loc, slot, zero, capacity),
                    inRange(b, loc, e, zero, experts));
                auto ifOp = scf::IfOp::create(
                    b, loc, kept,
                    [&](OpBuilder &b, Location loc) {
                      Value w = tensor::ExtractOp::create(b, loc, weights,
                                                          ValueRange{g, t, i});
                      Value expertRow = extractRow(b, loc, y, {e, g, slot}, d);
                      Value sum = addScaledRow(b, loc, acc[0], expertRow, w);
                      scf::YieldOp::create(b, loc, ValueRange{sum});
                    },
                    [&](OpBuilder &b, Location loc) {
                      scf::YieldOp::create(b, loc, ValueRange{acc[0]});
                    });
                return {ifOp.getResult(0)};
              })[0];
          return {{row, 0, {g, t, b.getIndexAttr(0)},
                   {b.getIndexAttr(1), b.getIndexAttr(1), d}}};
        });
    rewriter.replaceOp(op, forall.getResult(0));
    return success();
  }

  /// acc + w * row, elementwise over the 1-D rows (mul, then add).
  static Value addScaledRow(OpBuilder &b, Location loc, Value acc, Value row,
                            Value w) {
    AffineMap id = b.getMultiDimIdentityMap(1);
    return linalg::GenericOp::create(
               b, loc, acc.getType(), ValueRange{row}, ValueRange{acc},
               {id, id}, {utils::IteratorType::parallel},
               [&](OpBuilder &b, Location loc, ValueRange args) {
                 Value scaled = arith::MulFOp::create(b, loc, w, args[0]);
                 linalg::YieldOp::create(
                     b, loc,
                     ValueRange{arith::AddFOp::create(b, loc, args[1], scaled)});
               })
        .getResult(0);
  }
};

} // namespace

void mlir::vmoe::lowering::populateDispatchLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<DispatchOpLowering, CombineOpLowering>(patterns.getContext());
}
