//===- RouteLowering.cpp - Lower route, bpr_sort and capacity ---*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Routing ops to tensor-level linalg/scf: the router contraction and the
// softmax are linalg.generic ops; top-k and the BPR ranks are scf.forall
// loops over tokens whose results do not depend on the schedule.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "Patterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::lowering;

using utils::IteratorType;

namespace {

/// Builds `linalg.generic` over `numDims` loops from affine expressions.
struct GenericBuilder {
  OpBuilder &b;
  Location loc;
  unsigned numDims;

  AffineMap map(ArrayRef<unsigned> dims) const {
    SmallVector<AffineExpr> exprs;
    for (unsigned d : dims)
      exprs.push_back(b.getAffineDimExpr(d));
    return AffineMap::get(numDims, 0, exprs, b.getContext());
  }
};

} // namespace

/// logits[g, s, e] = sum_d x[g, s, d] * router[d, e], with the reduction loop
/// outside the expert loop so that the innermost loop is contiguous.
Value lowering::buildRouterLogits(OpBuilder &b, Location loc, Value x,
                                 Value router) {
  auto xType = cast<RankedTensorType>(x.getType());
  Type elementType = xType.getElementType();
  SmallVector<OpFoldResult> xSizes = mixedSizes(b, loc, x);
  SmallVector<OpFoldResult> sizes = {xSizes[0], xSizes[1],
                                     mixedSizes(b, loc, router)[1]};
  Value init = filledTensor(b, loc, sizes, floatConst(b, loc, elementType, 0));
  GenericBuilder g{b, loc, 4}; // (g, s, d, e)
  auto logits = linalg::GenericOp::create(
      b, loc, init.getType(), ValueRange{x, router}, ValueRange{init},
      {g.map({0, 1, 2}), g.map({2, 3}), g.map({0, 1, 3})},
      {IteratorType::parallel, IteratorType::parallel, IteratorType::reduction,
       IteratorType::parallel},
      buildMultiplyAccumulateBody);
  logits->setAttr(kRouterLogitsAttrName, b.getUnitAttr());
  return logits.getResult(0);
}

Value lowering::addRouterNoise(OpBuilder &b, Location loc, Value logits,
                               Value noise, Value router, double noiseStd) {
  // logits += noise * (noise_std / E), the scale rounded once to T.
  Type elementType = cast<RankedTensorType>(logits.getType()).getElementType();
  int64_t e = cast<RankedTensorType>(router.getType()).getDimSize(1);
  Value scale;
  if (ShapedType::isDynamic(e)) {
    Value numExperts = arith::IndexCastOp::create(
        b, loc, b.getI64Type(), tensor::DimOp::create(b, loc, router, 1));
    Value ef = arith::SIToFPOp::create(b, loc, b.getF64Type(), numExperts);
    Value s = arith::DivFOp::create(
        b, loc, floatConst(b, loc, b.getF64Type(), noiseStd), ef);
    scale = arith::TruncFOp::create(b, loc, elementType, s);
  } else {
    scale = floatConst(b, loc, elementType,
                       noiseStd / static_cast<double>(e));
  }
  Value init = emptyTensor(b, loc, mixedSizes(b, loc, logits), elementType);
  GenericBuilder g{b, loc, 3};
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{logits, noise},
             ValueRange{init},
             {g.map({0, 1, 2}), g.map({0, 1, 2}), g.map({0, 1, 2})},
             {IteratorType::parallel, IteratorType::parallel,
              IteratorType::parallel},
             [&](OpBuilder &b, Location loc, ValueRange args) {
               Value scaled = arith::MulFOp::create(b, loc, args[1], scale);
               linalg::YieldOp::create(
                   b, loc,
                   ValueRange{arith::AddFOp::create(b, loc, args[0], scaled)});
             })
      .getResult(0);
}

/// Divides the k entries of the 1-D `row` by their sum (added from 0 up).
static Value normalizeRow(OpBuilder &b, Location loc, Value row, Value k,
                          Type elementType) {
  Value sum = buildLoop(b, loc, k, {floatConst(b, loc, elementType, 0)},
                        [&](OpBuilder &b, Location loc, Value i,
                            ValueRange acc) -> SmallVector<Value> {
                          Value v = tensor::ExtractOp::create(b, loc, row, i);
                          return {arith::AddFOp::create(b, loc, acc[0], v)};
                        })[0];
  return buildLoop(b, loc, k, {row},
                   [&](OpBuilder &b, Location loc, Value i,
                       ValueRange acc) -> SmallVector<Value> {
                     Value v = tensor::ExtractOp::create(b, loc, acc[0], i);
                     Value q = arith::DivFOp::create(b, loc, v, sum);
                     return {tensor::InsertOp::create(b, loc, q, acc[0], i)};
                   })[0];
}

/// softmax over the k chosen logits of the 1-D `row` (choice 0 is the max).
static Value softmaxRow(OpBuilder &b, Location loc, Value row, Value k,
                        Type elementType) {
  Value top = tensor::ExtractOp::create(b, loc, row,
                                        ValueRange{indexConst(b, loc, 0)});
  Value exps = buildLoop(b, loc, k, {row},
                         [&](OpBuilder &b, Location loc, Value i,
                             ValueRange acc) -> SmallVector<Value> {
                           Value v = tensor::ExtractOp::create(b, loc, acc[0], i);
                           Value ex = math::ExpOp::create(
                               b, loc, arith::SubFOp::create(b, loc, v, top));
                           return {tensor::InsertOp::create(b, loc, ex, acc[0],
                                                            i)};
                         })[0];
  return normalizeRow(b, loc, exps, k, elementType);
}

namespace {

/// vmoe.route -> router contraction, softmax, per-token top-k.
struct RouteOpLowering : OpConversionPattern<RouteOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(RouteOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Type elementType = op.getGates().getType().getElementType();
    int64_t k = static_cast<int64_t>(op.getK());

    Value logits = buildRouterLogits(b, loc, adaptor.getX(),
                                     adaptor.getRouter());
    if (Value noise = adaptor.getNoise())
      logits = addRouterNoise(b, loc, logits, noise, adaptor.getRouter(),
                              op.getNoiseStdAttr().getValueAsDouble());
    Value gates = buildSoftmaxLastDim(b, loc, logits);
    bool softmaxFirst = op.getOrder() == RouteOrder::softmax_topk;
    Value key = softmaxFirst ? gates : logits;

    SmallVector<OpFoldResult> xSizes = mixedSizes(b, loc, adaptor.getX());
    SmallVector<OpFoldResult> choiceSizes = {xSizes[0], xSizes[1],
                                             b.getIndexAttr(k)};
    Value idsInit = emptyTensor(b, loc, choiceSizes, b.getI32Type());
    Value weightsInit = emptyTensor(b, loc, choiceSizes, elementType);
    Value numExperts = tensor::DimOp::create(b, loc, key, 2);
    Value kValue = indexConst(b, loc, k);
    bool normalize = op.getNormalize();

    auto forall = buildForall(
        b, loc, {xSizes[0], xSizes[1]}, {idsInit, weightsInit},
        [&](OpBuilder &b, Location loc, ValueRange ivs,
            ValueRange outs) -> SmallVector<ParallelInsert> {
          SmallVector<OpFoldResult> prefix = {ivs[0], ivs[1]};
          Value idsRow = extractRow(b, loc, outs[0], prefix, b.getIndexAttr(k));
          Value weightsRow =
              extractRow(b, loc, outs[1], prefix, b.getIndexAttr(k));
          ValueRange rows = buildTopK(
              b, loc, key, ivs, numExperts, kValue, {idsRow, weightsRow},
              [&](OpBuilder &b, Location loc, Value i, Value value,
                  Value index, ValueRange rows) -> SmallVector<Value> {
                Value id =
                    arith::IndexCastOp::create(b, loc, b.getI32Type(), index);
                return {tensor::InsertOp::create(b, loc, id, rows[0], i),
                        tensor::InsertOp::create(b, loc, value, rows[1], i)};
              });
          Value weights = rows[1];
          if (!softmaxFirst)
            weights = softmaxRow(b, loc, weights, kValue, elementType);
          if (normalize)
            weights = normalizeRow(b, loc, weights, kValue, elementType);
          return {{rows[0], 0, {ivs[0], ivs[1], b.getIndexAttr(0)},
                   {b.getIndexAttr(1), b.getIndexAttr(1), b.getIndexAttr(k)}},
                  {weights, 1, {ivs[0], ivs[1], b.getIndexAttr(0)},
                   {b.getIndexAttr(1), b.getIndexAttr(1), b.getIndexAttr(k)}}};
        });
    rewriter.replaceOp(op, {gates, forall.getResult(0), forall.getResult(1)});
    return success();
  }
};

/// vmoe.bpr_sort -> per-token score, its order key (buildOrderKey: NaN
/// below every number), then a stable rank count per token over the keys:
/// rank(t) = #{u : s_u > s_t} + #{u < t : s_u == s_t} = #{u : key_u >
/// key_t}; order[rank(t)] = t. One integer compare per pair, which LLVM
/// vectorizes.
struct BPRSortOpLowering : OpConversionPattern<BPRSortOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(BPRSortOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value gates = adaptor.getGates();
    Type elementType = op.getGates().getType().getElementType();
    SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, gates);
    Value n = tensor::DimOp::create(b, loc, gates, 2);

    Value scores;
    if (op.getScore() == PriorityScore::max) {
      double inf = std::numeric_limits<double>::infinity();
      scores = reduceLastDim(b, loc, gates, -inf,
                             [](OpBuilder &b, Location loc, Value acc,
                                Value v) -> Value {
                               return arith::MaximumFOp::create(b, loc, acc, v);
                             });
    } else {
      Value k = op.getK() ? indexConst(b, loc, static_cast<int64_t>(*op.getK()))
                          : n;
      Value init = emptyTensor(b, loc, {sizes[0], sizes[1]}, elementType);
      scores = buildForall(
                   b, loc, {sizes[0], sizes[1]}, {init},
                   [&](OpBuilder &b, Location loc, ValueRange ivs,
                       ValueRange outs) -> SmallVector<ParallelInsert> {
                     Value sum = buildTopK(
                         b, loc, gates, ivs, n, k,
                         {floatConst(b, loc, elementType, 0)},
                         [](OpBuilder &b, Location loc, Value, Value value,
                            Value, ValueRange acc) -> SmallVector<Value> {
                           return {arith::AddFOp::create(b, loc, acc[0], value)};
                         })[0];
                     SmallVector<OpFoldResult> at = {ivs[0], ivs[1]};
                     Value cell = insertScalar(b, loc, sum, outs[0], at);
                     return {{cell, 0, at,
                              {b.getIndexAttr(1), b.getIndexAttr(1)}}};
                   })
                   .getResult(0);
    }

    Value keysInit =
        emptyTensor(b, loc, {sizes[0], sizes[1]}, b.getI64Type());
    Value keys =
        buildForall(
            b, loc, {sizes[0], sizes[1]}, {keysInit},
            [&](OpBuilder &b, Location loc, ValueRange ivs,
                ValueRange outs) -> SmallVector<ParallelInsert> {
              Value score = tensor::ExtractOp::create(b, loc, scores, ivs);
              Value key = buildOrderKey(b, loc, score, ivs[1]);
              SmallVector<OpFoldResult> at = {ivs[0], ivs[1]};
              return {{insertScalar(b, loc, key, outs[0], at), 0, at,
                       {b.getIndexAttr(1), b.getIndexAttr(1)}}};
            })
            .getResult(0);
    Value orderInit =
        emptyTensor(b, loc, {sizes[0], sizes[1]}, b.getI32Type());
    Value s = tensor::DimOp::create(b, loc, gates, 1);
    auto forall = buildForall(
        b, loc, {sizes[0], sizes[1]}, {orderInit},
        [&](OpBuilder &b, Location loc, ValueRange ivs,
            ValueRange outs) -> SmallVector<ParallelInsert> {
          Value g = ivs[0], t = ivs[1];
          Value mine =
              tensor::ExtractOp::create(b, loc, keys, ValueRange{g, t});
          Value rank = buildLoop(
              b, loc, s, {indexConst(b, loc, 0)},
              [&](OpBuilder &b, Location loc, Value u,
                  ValueRange acc) -> SmallVector<Value> {
                Value other =
                    tensor::ExtractOp::create(b, loc, keys, ValueRange{g, u});
                Value before = arith::CmpIOp::create(
                    b, loc, arith::CmpIPredicate::sgt, other, mine);
                Value step = arith::IndexCastUIOp::create(
                    b, loc, b.getIndexType(), before);
                return {arith::AddIOp::create(b, loc, acc[0], step)};
              })[0];
          Value token = arith::IndexCastOp::create(b, loc, b.getI32Type(), t);
          SmallVector<OpFoldResult> at = {g, rank};
          Value cell = insertScalar(b, loc, token, outs[0], at);
          return {{cell, 0, at, {b.getIndexAttr(1), b.getIndexAttr(1)}}};
        });
    rewriter.replaceOp(op, forall.getResult(0));
    return success();
  }
};

/// vmoe.capacity -> scalar arithmetic of docs/Dialect.md, clamped.
struct CapacityOpLowering : OpConversionPattern<CapacityOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(CapacityOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value b = buildCapacityValue(
        rewriter, op.getLoc(), static_cast<int64_t>(op.getK()),
        indexConst(rewriter, op.getLoc(),
                   static_cast<int64_t>(op.getTokensPerGroup())),
        adaptor.getCapacityRatio(), static_cast<int64_t>(op.getNumExperts()),
        op.getCapacityRule(), static_cast<int64_t>(op.getMultipleOf()));
    Value max = indexConst(rewriter, op.getLoc(),
                           static_cast<int64_t>(op.getMaxCapacity()));
    rewriter.replaceOp(op,
                       arith::MinSIOp::create(rewriter, op.getLoc(), b, max));
    return success();
  }
};

} // namespace

Value mlir::vmoe::lowering::buildCapacityValue(OpBuilder &b, Location loc,
                                             int64_t k, Value tokens,
                                             Value ratio, int64_t numExperts,
                                             CapacityRule rule,
                                             int64_t multipleOf) {
  Type f64 = b.getF64Type();
  // ((k * S) * C) / E, left to right in double precision.
  Value s = arith::SIToFPOp::create(
      b, loc, f64, arith::IndexCastOp::create(b, loc, b.getI64Type(), tokens));
  Value raw = arith::MulFOp::create(b, loc, floatConst(b, loc, f64, k), s);
  raw = arith::MulFOp::create(b, loc, raw, ratio);
  raw = arith::DivFOp::create(b, loc, raw,
                              floatConst(b, loc, f64, numExperts));
  Value rounded = rule == CapacityRule::ceil
                      ? Value(math::CeilOp::create(b, loc, raw))
                      : Value(math::RoundEvenOp::create(b, loc, raw));
  // NaN and non-positive ratios give 0; huge ones saturate at 2^62.
  Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                         rounded, floatConst(b, loc, f64, 0));
  rounded = arith::SelectOp::create(b, loc, positive, rounded,
                                    floatConst(b, loc, f64, 0));
  rounded = arith::MinimumFOp::create(b, loc, rounded,
                                      floatConst(b, loc, f64, 0x1p62));
  Value capacity = arith::IndexCastOp::create(
      b, loc, b.getIndexType(),
      arith::FPToSIOp::create(b, loc, b.getI64Type(), rounded));
  if (multipleOf > 1) {
    Value m = indexConst(b, loc, multipleOf);
    capacity = arith::MulIOp::create(
        b, loc, arith::CeilDivSIOp::create(b, loc, capacity, m), m);
  }
  return capacity;
}

void mlir::vmoe::lowering::populateRouteLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<RouteOpLowering, BPRSortOpLowering, CapacityOpLowering>(
      patterns.getContext());
}
