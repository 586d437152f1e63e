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

/// Called for a kept choice i of token t that takes slot f (i32) of expert
/// e; gets and returns the tensors the caller carries through the loops.
using KeptChoiceFn = function_ref<SmallVector<Value>(
    OpBuilder &, Location, Value e, Value f, Value t, Value i, ValueRange)>;

/// The assignment of dispatch and assign_slots for one group: choice by
/// choice, tokens in priority order, each kept while its expert has room.
struct GroupAssignment {
  Value ids, order; ///< expert ids [G, S, k]; priority order [G, S] or null.
  int64_t numExperts, k;
  Value limit;    ///< The effective capacity (index).
  Value numValid; ///< Tokens g * S + t >= numValid are not routed; or null.

  /// Runs the loops for group g on its slots slice [1, S, k] and the
  /// caller's tensors; returns (slots, fill [E] i32, caller's tensors...).
  SmallVector<Value> build(OpBuilder &b, Location loc, Value g,
                           Value groupSlots, ValueRange carried,
                           KeptChoiceFn onKept) const {
    Value s = tensor::DimOp::create(b, loc, ids, 1);
    Value zero = indexConst(b, loc, 0);
    Value experts = indexConst(b, loc, numExperts);
    Value lastToken = arith::SubIOp::create(b, loc, s, indexConst(b, loc, 1));
    Value fill = filledTensor(b, loc, {b.getIndexAttr(numExperts)},
                              i32Const(b, loc, 0));
    SmallVector<Value> init = {groupSlots, fill};
    llvm::append_range(init, carried);
    ValueRange done = buildLoop(
        b, loc, indexConst(b, loc, k), init,
        [&](OpBuilder &b, Location loc, Value i,
            ValueRange state) -> SmallVector<Value> {
          return SmallVector<Value>(buildLoop(
              b, loc, s, state,
              [&](OpBuilder &b, Location loc, Value p,
                  ValueRange state) -> SmallVector<Value> {
                return place(b, loc, g, p, i, zero, experts, lastToken, state,
                             onKept);
              }));
        });
    return SmallVector<Value>(done);
  }

  /// Places choice i of the token at priority position p.
  SmallVector<Value> place(OpBuilder &b, Location loc, Value g, Value p,
                           Value i, Value zero, Value experts, Value lastToken,
                           ValueRange state, KeptChoiceFn onKept) const {
    Value groupSlots = state[0], fill = state[1];
    ValueRange carried = state.drop_front(2);
    // The token; an out-of-range order entry is clamped, never followed.
    Value t = p;
    if (order) {
      t = extractIndex(b, loc, order, {g, p});
      t = arith::MaxSIOp::create(b, loc,
                                 arith::MinSIOp::create(b, loc, t, lastToken),
                                 zero);
    }
    // The expert; ids outside [0, E) are dropped, and so are the choices of
    // masked tokens.
    Value e = extractIndex(b, loc, ids, {g, t, i});
    Value valid = inRange(b, loc, e, zero, experts);
    if (numValid) {
      Value s = arith::AddIOp::create(b, loc, lastToken, indexConst(b, loc, 1));
      Value position = arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, g, s), t);
      valid = arith::AndIOp::create(
          b, loc, valid,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, position,
                                numValid));
    }
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
    SmallVector<Type> types = {fill.getType()};
    for (Value v : carried)
      types.push_back(v.getType());
    auto ifOp = scf::IfOp::create(b, loc, types, kept, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value next = arith::AddIOp::create(b, loc, f32, i32Const(b, loc, 1));
      SmallVector<Value> updated = {
          tensor::InsertOp::create(b, loc, next, fill, ValueRange{e})};
      llvm::append_range(updated, onKept(b, loc, e, f32, t, i, carried));
      scf::YieldOp::create(b, loc, updated);
      b.setInsertionPointToStart(ifOp.elseBlock());
      SmallVector<Value> same = {fill};
      llvm::append_range(same, carried);
      scf::YieldOp::create(b, loc, same);
    }
    SmallVector<Value> next = {groupSlots};
    llvm::append_range(next, ifOp.getResults());
    return next;
  }
};

/// The effective capacity of a dispatch-like op: min(runtime, static B).
static Value capacityLimit(OpBuilder &b, Location loc, OpFoldResult capacity,
                           Value runtime) {
  Value limit = getValueOrCreateConstantIndexOp(b, loc, capacity);
  if (runtime)
    limit = arith::MinSIOp::create(b, loc, runtime, limit);
  return limit;
}

/// vmoe.dispatch -> buffers filled per group, choice by choice.
struct DispatchOpLowering : OpConversionPattern<DispatchOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(DispatchOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value x = adaptor.getX();
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
    GroupAssignment assignment{
        adaptor.getExpertIds(), adaptor.getOrder(), numExperts, k,
        capacityLimit(b, loc, capacity, adaptor.getRuntimeCapacity()),
        adaptor.getNumValid()};

    SmallVector<OpFoldResult> bufferSizes = {b.getIndexAttr(numExperts),
                                             xSizes[0], capacity, xSizes[2]};
    Value buffers =
        filledTensor(b, loc, bufferSizes, floatConst(b, loc, elementType, 0));
    Value slots = emptyTensor(b, loc, {xSizes[0], xSizes[1], b.getIndexAttr(k)},
                              b.getI32Type());
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
          // A kept choice copies its token row into the expert's slot.
          SmallVector<Value> done = assignment.build(
              b, loc, g, groupSlots, {groupBuffers},
              [&](OpBuilder &b, Location loc, Value e, Value f32, Value t,
                  Value, ValueRange carried) -> SmallVector<Value> {
                Value f = arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                                     f32);
                Value row = extractRow(b, loc, x, {g, t}, xSizes[2]);
                SmallVector<OpFoldResult> at = {e, b.getIndexAttr(0), f};
                Value dest = extractRow(b, loc, carried[0], at, xSizes[2]);
                Value copied = linalg::CopyOp::create(b, loc, ValueRange{row},
                                                      ValueRange{dest})
                                   .getResult(0);
                return {insertRow(b, loc, copied, carried[0], at, xSizes[2])};
              });
          return {{done[2], 0, groupOffsets, groupSizes},
                  {done[0], 1, slotOffsets, slotSizes}};
        });
    rewriter.replaceOp(op, forall.getResults());
    return success();
  }
};

/// vmoe.assign_slots -> the dispatch loops recording, per slot, the token
/// and choice it holds instead of copying rows.
struct AssignSlotsOpLowering : OpConversionPattern<AssignSlotsOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(AssignSlotsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto entriesType = op.getSlotEntries().getType();
    int64_t numExperts = entriesType.getDimSize(0);
    int64_t capacity = entriesType.getDimSize(2);
    Value ids = adaptor.getExpertIds();
    SmallVector<OpFoldResult> idSizes = mixedSizes(b, loc, ids);
    if (!isa<Attribute>(idSizes[2]))
      return rewriter.notifyMatchFailure(op, "k must be static");
    int64_t k = cast<IntegerAttr>(cast<Attribute>(idSizes[2])).getInt();
    GroupAssignment assignment{
        ids, adaptor.getOrder(), numExperts, k,
        capacityLimit(b, loc, b.getIndexAttr(capacity),
                      adaptor.getRuntimeCapacity()),
        adaptor.getNumValid()};

    Value slots = emptyTensor(b, loc, idSizes, b.getI32Type());
    Value entries = filledTensor(b, loc,
                                 {b.getIndexAttr(numExperts), idSizes[0],
                                  b.getIndexAttr(capacity)},
                                 i32Const(b, loc, -1));
    Value fill = emptyTensor(b, loc, {b.getIndexAttr(numExperts), idSizes[0]},
                             b.getI32Type());
    Value kValue = i32Const(b, loc, static_cast<int32_t>(k));
    auto forall = buildForall(
        b, loc, {idSizes[0]}, {slots, entries, fill},
        [&](OpBuilder &b, Location loc, ValueRange ivs,
            ValueRange outs) -> SmallVector<ParallelInsert> {
          Value g = ivs[0];
          SmallVector<OpFoldResult> slotOffsets = {g, b.getIndexAttr(0),
                                                   b.getIndexAttr(0)};
          SmallVector<OpFoldResult> slotSizes = {b.getIndexAttr(1), idSizes[1],
                                                 b.getIndexAttr(k)};
          Value groupSlots = tensor::ExtractSliceOp::create(
              b, loc, outs[0], slotOffsets, slotSizes, unitStrides(b, 3));
          SmallVector<OpFoldResult> entryOffsets = {b.getIndexAttr(0), g,
                                                    b.getIndexAttr(0)};
          SmallVector<OpFoldResult> entrySizes = {b.getIndexAttr(numExperts),
                                                  b.getIndexAttr(1),
                                                  b.getIndexAttr(capacity)};
          Value groupEntries = tensor::ExtractSliceOp::create(
              b, loc, outs[1], entryOffsets, entrySizes, unitStrides(b, 3));
          // A kept choice records t * k + i in its slot.
          SmallVector<Value> done = assignment.build(
              b, loc, g, groupSlots, {groupEntries},
              [&](OpBuilder &b, Location loc, Value e, Value f32, Value t,
                  Value i, ValueRange carried) -> SmallVector<Value> {
                Type i32 = b.getI32Type();
                Value entry = arith::AddIOp::create(
                    b, loc,
                    arith::MulIOp::create(
                        b, loc, arith::IndexCastOp::create(b, loc, i32, t),
                        kValue),
                    arith::IndexCastOp::create(b, loc, i32, i));
                Value f = arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                                     f32);
                return {tensor::InsertOp::create(
                    b, loc, entry, carried[0],
                    ValueRange{e, indexConst(b, loc, 0), f})};
              });
          // fill [E] of the group -> column g of fill [E, G].
          Value column = tensor::ExpandShapeOp::create(
              b, loc, RankedTensorType::get({numExperts, 1}, b.getI32Type()),
              done[1], ArrayRef<ReassociationIndices>{{0, 1}});
          return {{done[0], 0, slotOffsets, slotSizes},
                  {done[2], 1, entryOffsets, entrySizes},
                  {column, 2, {b.getIndexAttr(0), g},
                   {b.getIndexAttr(numExperts), b.getIndexAttr(1)}}};
        });
    rewriter.replaceOp(op, forall.getResults());
    return success();
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
  patterns.add<AssignSlotsOpLowering, DispatchOpLowering, CombineOpLowering>(
      patterns.getContext());
}
