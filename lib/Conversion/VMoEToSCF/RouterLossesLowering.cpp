//===- RouterLossesLowering.cpp - Lower vmoe.router_losses -----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The auxiliary losses of SPEC §8 as tensor-level linalg.generic reductions:
// per-expert sums over the tokens of a group (added from token 0 up), then
// the squared coefficient of variation over the experts. Everything after
// the gates is f32; the normal CDF is `erfc` (libm's erfcf on the CPU).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "Patterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::lowering;

using utils::IteratorType;

/// `v` as f32 (extended when the tensors are narrower).
static Value toF32(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
}

/// Dimension `i` of `tensor` as an f32 scalar.
static Value dimAsF32(OpBuilder &b, Location loc, Value tensor, int64_t i) {
  Value dim = tensor::DimOp::create(b, loc, tensor, i);
  Value asInt = arith::IndexCastOp::create(b, loc, b.getI64Type(), dim);
  return arith::SIToFPOp::create(b, loc, b.getF32Type(), asInt);
}

/// sums[g, e] = sum over t (from 0 up) of term(g, t, e), in f32; `term`
/// receives the elements of `inputs` (each `G x S x E` or `G x S`) and the
/// expert index e.
static Value sumOverTokens(
    OpBuilder &b, Location loc, ValueRange inputs, ArrayRef<bool> perToken,
    SmallVector<OpFoldResult> sizes,
    function_ref<Value(OpBuilder &, Location, ValueRange, Value)> term) {
  Value init = filledTensor(b, loc, {sizes[0], sizes[2]},
                            floatConst(b, loc, b.getF32Type(), 0));
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineMap> maps;
  for (bool token : perToken)
    maps.push_back(token ? projectionMap(ctx, 3, {0, 1})
                         : b.getMultiDimIdentityMap(3));
  maps.push_back(projectionMap(ctx, 3, {0, 2}));
  return linalg::GenericOp::create(
             b, loc, init.getType(), inputs, ValueRange{init}, maps,
             {IteratorType::parallel, IteratorType::reduction,
              IteratorType::parallel},
             [&](OpBuilder &b, Location loc, ValueRange args) {
               Value e = linalg::IndexOp::create(b, loc, 2);
               Value v = term(b, loc, args.drop_back(), e);
               linalg::YieldOp::create(
                   b, loc,
                   ValueRange{arith::AddFOp::create(b, loc, args.back(), v)});
             })
      .getResult(0);
}

/// Elementwise map of 1-D f32 tensors of the same size.
static Value map1D(OpBuilder &b, Location loc, ValueRange inputs,
                   function_ref<Value(OpBuilder &, Location, ValueRange)> fn) {
  Value init = emptyTensor(b, loc, mixedSizes(b, loc, inputs[0]),
                           b.getF32Type());
  SmallVector<AffineMap> maps(inputs.size() + 1, b.getMultiDimIdentityMap(1));
  return linalg::GenericOp::create(
             b, loc, init.getType(), inputs, ValueRange{init}, maps,
             {IteratorType::parallel},
             [&](OpBuilder &b, Location loc, ValueRange args) {
               linalg::YieldOp::create(
                   b, loc, ValueRange{fn(b, loc, args.drop_back())});
             })
      .getResult(0);
}

/// (std / mean)^2 over the last dim of the f32 `G x E` tensor `v`, with the
/// population variance mean((v - mean)^2).
static Value squaredVariation(OpBuilder &b, Location loc, Value v,
                              Value numExperts) {
  auto add = [](OpBuilder &b, Location loc, Value acc, Value x) {
    return Value(arith::AddFOp::create(b, loc, acc, x));
  };
  Value sums = reduceLastDim(b, loc, v, 0.0, add);
  Value means = map1D(b, loc, {sums}, [&](OpBuilder &b, Location loc,
                                          ValueRange a) -> Value {
    return arith::DivFOp::create(b, loc, a[0], numExperts);
  });
  Value squares = mapWithRowValue(
      b, loc, v, means, [](OpBuilder &b, Location loc, Value x, Value m) {
        Value d = arith::SubFOp::create(b, loc, x, m);
        return Value(arith::MulFOp::create(b, loc, d, d));
      });
  Value squareSums = reduceLastDim(b, loc, squares, 0.0, add);
  return map1D(b, loc, {squareSums, means},
               [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
                 Value var = arith::DivFOp::create(b, loc, a[0], numExperts);
                 Value mean2 = arith::MulFOp::create(b, loc, a[1], a[1]);
                 return arith::DivFOp::create(b, loc, var, mean2);
               });
}

/// The argmax expert of every token (`G x S`, i32): the first of the
/// largest gates, so ties go to the lower expert index.
static Value argmaxExperts(OpBuilder &b, Location loc, Value gates) {
  SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, gates);
  Type elementType = cast<RankedTensorType>(gates.getType()).getElementType();
  double inf = std::numeric_limits<double>::infinity();
  Value best = filledTensor(b, loc, {sizes[0], sizes[1]},
                            floatConst(b, loc, elementType, -inf));
  Value ids = filledTensor(b, loc, {sizes[0], sizes[1]}, i32Const(b, loc, 0));
  MLIRContext *ctx = b.getContext();
  AffineMap perToken = projectionMap(ctx, 3, {0, 1});
  return linalg::GenericOp::create(
             b, loc, TypeRange{best.getType(), ids.getType()},
             ValueRange{gates}, ValueRange{best, ids},
             {b.getMultiDimIdentityMap(3), perToken, perToken},
             {IteratorType::parallel, IteratorType::parallel,
              IteratorType::reduction},
             [&](OpBuilder &b, Location loc, ValueRange args) {
               Value e = arith::IndexCastOp::create(
                   b, loc, b.getI32Type(), linalg::IndexOp::create(b, loc, 2));
               Value larger = arith::CmpFOp::create(
                   b, loc, arith::CmpFPredicate::OGT, args[0], args[1]);
               linalg::YieldOp::create(
                   b, loc,
                   ValueRange{
                       arith::SelectOp::create(b, loc, larger, args[0], args[1]),
                       arith::SelectOp::create(b, loc, larger, e, args[2])});
             })
      .getResult(1);
}

/// The k-th largest of the last dim of `noisy` (`G x S x E` -> `G x S`).
static Value kthLargest(OpBuilder &b, Location loc, Value noisy, int64_t k) {
  SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, noisy);
  Type elementType = cast<RankedTensorType>(noisy.getType()).getElementType();
  Value init = emptyTensor(b, loc, {sizes[0], sizes[1]}, elementType);
  Value numExperts = tensor::DimOp::create(b, loc, noisy, 2);
  return buildForall(
             b, loc, {sizes[0], sizes[1]}, {init},
             [&](OpBuilder &b, Location loc, ValueRange ivs,
                 ValueRange outs) -> SmallVector<ParallelInsert> {
               Value last = buildTopK(
                   b, loc, noisy, ivs, numExperts, indexConst(b, loc, k),
                   {floatConst(b, loc, elementType, 0)},
                   [](OpBuilder &, Location, Value, Value value, Value,
                      ValueRange) -> SmallVector<Value> { return {value}; })[0];
               SmallVector<OpFoldResult> at = {ivs[0], ivs[1]};
               Value cell = insertScalar(b, loc, last, outs[0], at);
               return {{cell, 0, at, {b.getIndexAttr(1), b.getIndexAttr(1)}}};
             })
      .getResult(0);
}

/// sum over the last dim of a * b (two f32 `G x E` tensors) -> `G`.
static Value dotLastDim(OpBuilder &b, Location loc, Value lhs, Value rhs) {
  Value init = filledTensor(b, loc, {mixedSizes(b, loc, lhs)[0]},
                            floatConst(b, loc, b.getF32Type(), 0));
  MLIRContext *ctx = b.getContext();
  AffineMap id = b.getMultiDimIdentityMap(2);
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{lhs, rhs}, ValueRange{init},
             {id, id, projectionMap(ctx, 2, {0})},
             {IteratorType::parallel, IteratorType::reduction},
             [&](OpBuilder &b, Location loc, ValueRange args) {
               Value p = arith::MulFOp::create(b, loc, args[0], args[1]);
               linalg::YieldOp::create(
                   b, loc, ValueRange{arith::AddFOp::create(b, loc, args[2], p)});
             })
      .getResult(0);
}

namespace {

/// vmoe.router_losses -> router contraction, (noisy) softmax, reductions.
struct RouterLossesOpLowering : OpConversionPattern<RouterLossesOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(RouterLossesOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value router = adaptor.getRouter();
    // Without noise (an inference graph) the load loss is the constant 0.
    Value load;
    if (!adaptor.getNoise())
      load = filledTensor(b, loc, {mixedSizes(b, loc, adaptor.getX())[0]},
                          floatConst(b, loc, b.getF32Type(), 0));
    Value logits = buildRouterLogits(b, loc, adaptor.getX(), router);
    Value noisy = logits;
    std::optional<double> noiseStd;
    if (Value noise = adaptor.getNoise()) {
      noiseStd = op.getNoiseStdAttr().getValueAsDouble();
      noisy = addRouterNoise(b, loc, logits, noise, router, *noiseStd);
    }
    Value gates = buildSoftmaxLastDim(b, loc, noisy);
    SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, gates);
    Value numExperts = dimAsF32(b, loc, gates, 2);
    Value numTokens = dimAsF32(b, loc, gates, 1);

    // importance: I[e] = sum_t gates[t, e].
    Value gateSums = sumOverTokens(
        b, loc, {gates}, {false}, sizes,
        [](OpBuilder &b, Location loc, ValueRange a, Value) {
          return toF32(b, loc, a[0]);
        });
    Value importance = squaredVariation(b, loc, gateSums, numExperts);

    // GShard: E^2 * mean_e(count[e] / S * I[e] / S)
    //       = E / S^2 * sum_e count[e] * I[e].
    Value argmax = argmaxExperts(b, loc, gates);
    Value counts = sumOverTokens(
        b, loc, {argmax}, {true}, sizes,
        [](OpBuilder &b, Location loc, ValueRange a, Value e) -> Value {
          Value id = arith::IndexCastOp::create(b, loc, b.getIndexType(), a[0]);
          Value hit = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                            id, e);
          return arith::UIToFPOp::create(b, loc, b.getF32Type(), hit);
        });
    Value dots = dotLastDim(b, loc, counts, gateSums);
    Value gshard = map1D(
        b, loc, {dots}, [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
          Value s2 = arith::MulFOp::create(b, loc, numTokens, numTokens);
          Value scale = arith::DivFOp::create(b, loc, numExperts, s2);
          return arith::MulFOp::create(b, loc, a[0], scale);
        });

    // load: L[e] = sum_t (1 - Phi((thr[t] - logits[t, e]) / sigma)), the
    // mean's 1/S cancelling in the ratio; 1 - Phi(z) = erfc(z/sqrt 2) / 2.
    if (noiseStd) {
      Value threshold = kthLargest(b, loc, noisy,
                                   static_cast<int64_t>(op.getK()));
      Value sigma = arith::DivFOp::create(
          b, loc, floatConst(b, loc, b.getF32Type(), *noiseStd), numExperts);
      Value probabilities = sumOverTokens(
          b, loc, {threshold, logits}, {true, false}, sizes,
          [&](OpBuilder &b, Location loc, ValueRange a, Value) -> Value {
            auto c = [&](double v) {
              return floatConst(b, loc, b.getF32Type(), v);
            };
            Value gap = arith::SubFOp::create(b, loc, toF32(b, loc, a[0]),
                                              toF32(b, loc, a[1]));
            Value z = arith::DivFOp::create(b, loc, gap, sigma);
            Value tail = math::ErfcOp::create(
                b, loc, arith::MulFOp::create(b, loc, z, c(M_SQRT1_2)));
            return arith::MulFOp::create(b, loc, tail, c(0.5));
          });
      load = squaredVariation(b, loc, probabilities, numExperts);
    }
    rewriter.replaceOp(op, {importance, load, gshard});
    return success();
  }
};

} // namespace

void mlir::vmoe::lowering::populateRouterLossesLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<RouterLossesOpLowering>(patterns.getContext());
}
