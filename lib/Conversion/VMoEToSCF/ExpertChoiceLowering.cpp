//===- ExpertChoiceLowering.cpp - Lower the expert choice ops ---*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe.expert_choice -> the gates of vmoe.route (lowered by its own pattern
// in the same conversion, so they are bit for bit those of route), then an
// scf.forall over (group, expert) that selects the expert's top-b tokens
// from its gate column with the top-k loop shared with route.
//
// vmoe.expert_choice_experts -> one scf.forall over experts whose body runs
// two microkernel GEMMs on the taken rows of all groups only:
//
//   hidden[r] = act(x[g(r), t(r)] . w1[e] + b1[e])   (rows gathered from x)
//   y[e, g(r), s(r)] = hidden[r] . w2[e] + b2[e]
//
// where row r is filled slot s of expert e in group g, holding token t.
// With `weight_panels` the GEMMs read w1 and w2 from their panels in place
// (packed once, at model load); otherwise each block of the weights is
// packed into a scratch on the stack of the thread running the expert.
// Then an scf.forall over tokens adds gates[g, t, e] * y[e, g, slot] over
// the experts that took the token, from expert 0 up. Every y row has one
// writer and every output row one reader of fixed order, so nothing depends
// on the schedule.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "Patterns.h"

#include "vmoe/Codegen/Microkernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::lowering;

/// `key` (G x E x S) with NaN where token t of group g is padding
/// (`g * S + t >= numValid`): NaN keys are never taken by buildTopK.
static Value maskInvalidTokens(OpBuilder &b, Location loc, Value key,
                               Value numValid) {
  auto type = cast<RankedTensorType>(key.getType());
  MLIRContext *ctx = b.getContext();
  Value s = tensor::DimOp::create(b, loc, key, 2);
  Value nan = arith::ConstantOp::create(
      b, loc, FloatAttr::get(type.getElementType(),
                             std::numeric_limits<double>::quiet_NaN()));
  AffineMap identity = AffineMap::getMultiDimIdentityMap(3, ctx);
  return linalg::GenericOp::create(
             b, loc, type, ValueRange{key}, ValueRange{key},
             {identity, identity},
             {utils::IteratorType::parallel, utils::IteratorType::parallel,
              utils::IteratorType::parallel},
             [&](OpBuilder &b, Location loc, ValueRange args) {
               Value g = linalg::IndexOp::create(b, loc, 0);
               Value t = linalg::IndexOp::create(b, loc, 2);
               Value flat = arith::AddIOp::create(
                   b, loc, arith::MulIOp::create(b, loc, g, s), t);
               Value keep = arith::CmpIOp::create(
                   b, loc, arith::CmpIPredicate::slt, flat, numValid);
               linalg::YieldOp::create(
                   b, loc,
                   ValueRange{arith::SelectOp::create(b, loc, keep, args[0],
                                                      nan)});
             })
      .getResult(0);
}

namespace {

/// vmoe.expert_choice -> gates, then per (group, expert) the top-b tokens.
struct ExpertChoiceOpLowering : OpConversionPattern<ExpertChoiceOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(ExpertChoiceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value x = adaptor.getX();
    Type elementType = op.getGates().getType().getElementType();
    auto route = RouteOp::create(b, loc, x, adaptor.getRouter(), /*k=*/1);
    Value gates = route.getGates();

    // Each expert's gate column contiguous: key[g, e, t] = gates[g, t, e].
    SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, gates); // G, S, E
    Value keyInit =
        emptyTensor(b, loc, {sizes[0], sizes[2], sizes[1]}, elementType);
    Value key = linalg::TransposeOp::create(b, loc, gates, keyInit,
                                            ArrayRef<int64_t>{0, 2, 1})
                    .getResult()[0];
    if (Value numValid = adaptor.getNumValid())
      key = maskInvalidTokens(b, loc, key, numValid);

    // b = min(B, S[, capacity operand clamped at 0]).
    int64_t capacity = op.getTokenIds().getType().getDimSize(2);
    Value s = tensor::DimOp::create(b, loc, x, 1);
    Value taken =
        arith::MinSIOp::create(b, loc, indexConst(b, loc, capacity), s);
    if (Value runtime = adaptor.getRuntimeCapacity())
      taken = arith::MinSIOp::create(
          b, loc, taken,
          arith::MaxSIOp::create(b, loc, runtime, indexConst(b, loc, 0)));

    Type i32 = b.getI32Type();
    OpFoldResult numExperts =
        b.getIndexAttr(op.getTokenIds().getType().getDimSize(0));
    Value tokensInit = emptyTensor(
        b, loc, {numExperts, sizes[0], b.getIndexAttr(capacity)}, i32);
    Value slotsInit = emptyTensor(b, loc, sizes, i32);
    Value none = i32Const(b, loc, -1);
    auto forall = buildForall(
        b, loc, {sizes[0], numExperts}, {tokensInit, slotsInit},
        [&](OpBuilder &b, Location loc, ValueRange ivs,
            ValueRange) -> SmallVector<ParallelInsert> {
          Value g = ivs[0], e = ivs[1];
          Value tokenRow = filledTensor(b, loc, {b.getIndexAttr(capacity)},
                                        none);
          Value slotColumn = filledTensor(b, loc, {sizes[1]}, none);
          ValueRange rows = buildTopK(
              b, loc, key, {g, e}, s, taken, {tokenRow, slotColumn},
              [&](OpBuilder &b, Location loc, Value i, Value, Value token,
                  ValueRange rows) -> SmallVector<Value> {
                // token is -1 when no candidate is left (NaN gates).
                Value valid =
                    arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                          token, indexConst(b, loc, 0));
                Value token32 =
                    arith::IndexCastOp::create(b, loc, i32, token);
                Value slot32 = arith::IndexCastOp::create(b, loc, i32, i);
                Value tokens = tensor::InsertOp::create(
                    b, loc, arith::SelectOp::create(b, loc, valid, token32, none),
                    rows[0], ValueRange{i});
                Value at = arith::SelectOp::create(b, loc, valid, token,
                                                   indexConst(b, loc, 0));
                Value old = tensor::ExtractOp::create(b, loc, rows[1], at);
                Value slots = tensor::InsertOp::create(
                    b, loc, arith::SelectOp::create(b, loc, valid, slot32, old),
                    rows[1], ValueRange{at});
                return {tokens, slots};
              });
          OpFoldResult one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
          return {{rows[0], 0, {e, g, zero},
                   {one, one, b.getIndexAttr(capacity)}},
                  {rows[1], 1, {g, zero, e}, {one, sizes[1], one}}};
        });
    rewriter.replaceOp(op,
                       {gates, forall.getResult(0), forall.getResult(1)});
    return success();
  }
};

/// vmoe.expert_choice_experts -> gathered GEMMs per expert, then the
/// gate-weighted sum per token in expert order.
struct ExpertChoiceExpertsOpLowering
    : OpConversionPattern<ExpertChoiceExpertsOp> {
  ExpertChoiceExpertsOpLowering(MLIRContext *context, MicrokernelShape shape)
      : OpConversionPattern(context), shape(shape) {}

  LogicalResult
  matchAndRewrite(ExpertChoiceExpertsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto xType = op.getX().getType();
    if (!xType.getElementType().isF32())
      return rewriter.notifyMatchFailure(op, "only f32 is lowered");
    FailureOr<std::optional<int64_t>> panelWidth =
        expertPanelWidth(op, op.getWeightPanels(), shape);
    if (failed(panelWidth))
      return failure();
    Operands in;
    in.x = readOnlyBuffer(b, loc, adaptor.getX());
    in.tokens = readOnlyBuffer(b, loc, adaptor.getTokenIds());
    in.w1 = readOnlyBuffer(b, loc, adaptor.getW1());
    in.b1 = readOnlyBuffer(b, loc, adaptor.getB1());
    in.w2 = readOnlyBuffer(b, loc, adaptor.getW2());
    in.b2 = readOnlyBuffer(b, loc, adaptor.getB2());
    Value gates = readOnlyBuffer(b, loc, adaptor.getGates());
    Value slots = readOnlyBuffer(b, loc, adaptor.getSlots());
    auto dim = [&](Value memref, int64_t i) {
      return getValueOrCreateConstantIndexOp(
          b, loc, memref::getMixedSize(b, loc, memref, i));
    };
    Value g = dim(in.x, 0), s = dim(in.x, 1), d = dim(in.x, 2);
    // H from b1: w1 may be in panel layout.
    Value capacity = dim(in.tokens, 2), h = dim(in.b1, 1);
    int64_t numExperts = op.getTokenIds().getType().getDimSize(0);
    std::optional<int64_t> staticH = staticDim(op.getB1().getType(), 1);
    std::optional<int64_t> staticD = staticDim(xType, 2);

    // y[e, g, s]: the output of expert e for its slot s of group g; only
    // filled slots are written (and read).
    auto yType = MemRefType::get(
        {numExperts, xType.getDimSize(0),
         op.getTokenIds().getType().getDimSize(2), xType.getDimSize(2)},
        b.getF32Type());
    SmallVector<Value> ySizes;
    // A named array: an initializer list in the range would die before the
    // loop (found by ASan, fuzz/PassesFuzzer.cpp).
    Value sizes[] = {g, capacity, d};
    for (auto [i, size] : llvm::enumerate(sizes))
      if (yType.isDynamicDim(i + 1))
        ySizes.push_back(size);
    in.y = memref::AllocOp::create(b, loc, yType, ySizes,
                                   b.getI64IntegerAttr(64));

    scf::ForallOp::create(
        b, loc, ArrayRef<OpFoldResult>{b.getIndexAttr(numExperts)},
        ValueRange{}, std::nullopt,
        [&](OpBuilder &b, Location loc, ValueRange ivs) {
          Value ex = ivs[0];
          // rowGroup[r], rowSlot[r], rowToken[r]: the filled slots of
          // group 0, then of group 1, ... (stores past the last filled row
          // are overwritten or never read).
          Value maxRows = arith::MulIOp::create(b, loc, g, capacity);
          auto tableType =
              MemRefType::get({ShapedType::kDynamic}, b.getIndexType());
          Rows rows;
          rows.group = memref::AllocOp::create(b, loc, tableType,
                                               ValueRange{maxRows});
          rows.slot = memref::AllocOp::create(b, loc, tableType,
                                              ValueRange{maxRows});
          rows.token = memref::AllocOp::create(b, loc, tableType,
                                               ValueRange{maxRows});
          Value zero = indexConst(b, loc, 0), one = indexConst(b, loc, 1);
          rows.count =
              buildLoop(
                  b, loc, g, {zero},
                  [&](OpBuilder &b, Location loc, Value gr,
                      ValueRange acc) -> SmallVector<Value> {
                    return {buildLoop(
                        b, loc, capacity, {acc[0]},
                        [&](OpBuilder &b, Location loc, Value slot,
                            ValueRange acc) -> SmallVector<Value> {
                          Value r = acc[0];
                          Value token =
                              loadIndex(b, loc, in.tokens, {ex, gr, slot});
                          memref::StoreOp::create(b, loc, gr, rows.group,
                                                  ValueRange{r});
                          memref::StoreOp::create(b, loc, slot, rows.slot,
                                                  ValueRange{r});
                          memref::StoreOp::create(b, loc, token, rows.token,
                                                  ValueRange{r});
                          Value filled = arith::CmpIOp::create(
                              b, loc, arith::CmpIPredicate::sge, token, zero);
                          return {arith::AddIOp::create(
                              b, loc, r,
                              arith::SelectOp::create(b, loc, filled, one,
                                                      zero))};
                        })[0]};
                  })[0];
          Value any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt,
                                            rows.count, zero);
          scf::IfOp::create(b, loc, any, [&](OpBuilder &b, Location loc) {
            emitExpert(
                b, loc, ex, rows, maxRows, h, d, staticH, staticD, in,
                {in.w1, in.b1, in.w2, in.b2, op.getActivation(), *panelWidth});
            scf::YieldOp::create(b, loc);
          });
          scf::InParallelOp::create(b, loc);
        });

    // out[g, t] = sum over e ascending of gates[g, t, e] * y[e, g, slot],
    // a product per expert that took t; vectors of `lanes` over D.
    auto outType = MemRefType::get(xType.getShape(), b.getF32Type());
    SmallVector<Value> outSizes;
    for (auto [i, size] : llvm::enumerate(xType.getShape()))
      if (ShapedType::isDynamic(size))
        outSizes.push_back(i == 0 ? g : i == 1 ? s : d);
    Value out = memref::AllocOp::create(b, loc, outType, outSizes,
                                        b.getI64IntegerAttr(64));
    auto vectorType = VectorType::get({shape.lanes}, b.getF32Type());
    bool fullVectors = staticD && *staticD % shape.lanes == 0;
    scf::ForallOp::create(
        b, loc, ArrayRef<OpFoldResult>{g, s}, ValueRange{}, std::nullopt,
        [&](OpBuilder &b, Location loc, ValueRange ivs) {
          Value gr = ivs[0], t = ivs[1];
          Value zero = indexConst(b, loc, 0);
          Value zeros = floatConst(b, loc, vectorType, 0);
          scf::ForOp::create(
              b, loc, zero, d, indexConst(b, loc, shape.lanes), ValueRange{},
              [&](OpBuilder &b, Location loc, Value d0, ValueRange) {
                Value mask;
                if (!fullVectors)
                  mask = vector::CreateMaskOp::create(
                      b, loc, VectorType::get({shape.lanes}, b.getI1Type()),
                      ValueRange{arith::SubIOp::create(b, loc, d, d0)});
                Value sum = buildLoop(
                    b, loc, indexConst(b, loc, numExperts), {zeros},
                    [&](OpBuilder &b, Location loc, Value ex,
                        ValueRange acc) -> SmallVector<Value> {
                      Value slot = loadIndex(b, loc, slots, {gr, t, ex});
                      Value took = arith::CmpIOp::create(
                          b, loc, arith::CmpIPredicate::sge, slot, zero);
                      Value row = arith::MaxSIOp::create(b, loc, slot, zero);
                      Value y = loadVector(b, loc, vectorType, in.y,
                                           {ex, gr, row, d0}, mask);
                      Value gate = memref::LoadOp::create(
                          b, loc, gates, ValueRange{gr, t, ex});
                      Value product = arith::MulFOp::create(
                          b, loc,
                          vector::BroadcastOp::create(b, loc, vectorType,
                                                      gate),
                          y);
                      // Adding +0 for an expert that did not take t, as
                      // the reference does.
                      return {arith::AddFOp::create(
                          b, loc, acc[0],
                          arith::SelectOp::create(b, loc, took, product,
                                                  zeros))};
                    })[0];
                storeVector(b, loc, sum, out, {gr, t, d0}, mask);
                scf::YieldOp::create(b, loc);
              });
          scf::InParallelOp::create(b, loc);
        });

    rewriter.replaceOp(op, bufferization::ToTensorOp::create(
                               b, loc, xType, out, /*restrict=*/true,
                               /*writable=*/true));
    return success();
  }

private:
  /// The buffers the expert GEMMs read and write.
  struct Operands {
    Value x, tokens, w1, b1, w2, b2, y;
  };
  /// The taken rows of one expert: `count` rows, row r is slot rowSlot[r]
  /// of group rowGroup[r], holding token rowToken[r].
  struct Rows {
    Value group, slot, token, count;
  };

  /// The two GEMMs of expert `ex` over its taken rows (all groups): row r
  /// gathers x[g(r), t(r)] and writes y[e, g(r), s(r)].
  void emitExpert(OpBuilder &b, Location loc, Value ex, const Rows &rows,
                  Value maxRows, Value h, Value d,
                  std::optional<int64_t> staticH,
                  std::optional<int64_t> staticD, const Operands &in,
                  const ExpertMLPWeights &weights) const {
    auto at = [](Value table) {
      return [table](OpBuilder &b, Location loc, Value row) {
        return Value(memref::LoadOp::create(b, loc, table, ValueRange{row}));
      };
    };
    auto groupOf = at(rows.group), slotOf = at(rows.slot),
         tokenOf = at(rows.token);
    emitExpertMLP(
        b, loc, shape, weights, ex, rows.count, maxRows, d, h, staticD, staticH,
        [&](OpBuilder &b, Location loc, Value row, Value kk) {
          return Value(memref::LoadOp::create(
              b, loc, in.x,
              ValueRange{groupOf(b, loc, row), tokenOf(b, loc, row), kk}));
        },
        in.y,
        [&](OpBuilder &b, Location loc, Value row, Value n) {
          return SmallVector<Value>{ex, groupOf(b, loc, row),
                                    slotOf(b, loc, row), n};
        });
  }

  MicrokernelShape shape;
};

} // namespace

void mlir::vmoe::lowering::populateExpertChoiceLoweringPatterns(
    RewritePatternSet &patterns, const MicrokernelShape &shape) {
  patterns.add<ExpertChoiceOpLowering>(patterns.getContext());
  patterns.add<ExpertChoiceExpertsOpLowering>(patterns.getContext(), shape);
}
