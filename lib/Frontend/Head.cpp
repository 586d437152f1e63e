//===- Head.cpp - Final LayerNorm, pooling and classifier -------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Pooling -- the class token, the mean over tokens, or multihead attention
// pooling (big_vision's MAPHead) -- with the final LayerNorm before it (on
// every token) or after it (on the pooled vector, timm's fc_norm), the
// optional dense + tanh pre-logits layer, then the classifier.
//
//===----------------------------------------------------------------------===//

#include "ForwardBuilder.h"

#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::frontend;

using utils::IteratorType;

/// The rows of the class tokens (token 0 of each image) of x [N*T, D].
Value ForwardBuilder::classTokens(Value x) {
  int64_t n = batchImages(model, options), t = model.tokensPerImage();
  int64_t d = model.modelWidth;
  Value tokens = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({n, t, d}, f32), x,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  return tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get({n, d}, f32), tokens,
      ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0),
                             b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(n), b.getIndexAttr(1),
                             b.getIndexAttr(d)},
      unitStrides(b, 3));
}

/// Only the class token reaches a `token` head, and every later step (the
/// final norm, pre-logits, classifier) is per row: the last block need not
/// compute the other rows. Training graphs and expert parallelism keep
/// every row (their losses and exchanges are built for all tokens).
bool ForwardBuilder::lastBlockForClassTokens() const {
  return model.head == "token" && !options.allTokenRows &&
         !options.training && options.expertParallel == 0;
}

/// The class token, or the mean over tokens, of x [N*T, D] -> [N, D].
Value ForwardBuilder::pool(Value x) {
  if (model.head == "token")
    return classTokens(x);
  int64_t n = batchImages(model, options), t = model.tokensPerImage();
  int64_t d = model.modelWidth;
  Value tokens = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({n, t, d}, f32), x,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  MLIRContext *ctx = b.getContext();
  Value init = filledTensor(b, loc, {b.getIndexAttr(n), b.getIndexAttr(d)},
                            floatConst(b, loc, f32, 0));
  Value sums =
      linalg::GenericOp::create(
          b, loc, init.getType(), ValueRange{tokens}, ValueRange{init},
          {projectionMap(ctx, 3, {0, 1, 2}), projectionMap(ctx, 3, {0, 2})},
          {IteratorType::parallel, IteratorType::reduction,
           IteratorType::parallel},
          [](OpBuilder &b, Location loc, ValueRange args) {
            linalg::YieldOp::create(
                b, loc,
                ValueRange{arith::AddFOp::create(b, loc, args[1], args[0])});
          })
          .getResult(0);
  Value count = floatConst(b, loc, f32, static_cast<double>(t));
  return mapScalars(sums, [&](OpBuilder &b, Location loc, Value v) {
    return Value(arith::DivFOp::create(b, loc, v, count));
  });
}

/// Multihead attention pooling of x [N*T, D] -> [N, D]: the learned probe
/// attends to the tokens of each image (query map.attn.q, keys and values
/// map.attn.kv, k before v, head h in columns h*dh .. (h+1)*dh of each),
/// then `p + mlp(ln(p))` with map.ln and map.mlp.
Value ForwardBuilder::mapPool(Value x) {
  int64_t n = batchImages(model, options), t = model.tokensPerImage();
  int64_t d = model.modelWidth, heads = model.heads, dh = d / heads;
  MLIRContext *ctx = b.getContext();
  // The probe is the same query for every image: [1, D] -> [heads, dh].
  Value q = tensor::CollapseShapeOp::create(
      b, loc, linear(weight("map.probe"), "map.attn.q"),
      ArrayRef<ReassociationIndices>{{0, 1}});
  q = tensor::ExpandShapeOp::create(b, loc,
                                    RankedTensorType::get({heads, dh}, f32), q,
                                    ArrayRef<ReassociationIndices>{{0, 1}});
  Value kv = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({n, t, 2, heads, dh}, f32),
      linear(x, "map.attn.kv"),
      ArrayRef<ReassociationIndices>{{0, 1}, {2, 3, 4}});
  Value k = extractIndexOfDim(b, loc, kv, 2, 0);
  Value v = extractIndexOfDim(b, loc, kv, 2, 1);
  // scores[n, h, j] = sum_c q[h, c] k[n, j, h, c] / sqrt(dh).
  Value scoresInit = filledTensor(
      b, loc, {b.getIndexAttr(n), b.getIndexAttr(heads), b.getIndexAttr(t)},
      floatConst(b, loc, f32, 0));
  Value scores =
      linalg::GenericOp::create(
          b, loc, scoresInit.getType(), ValueRange{q, k},
          ValueRange{scoresInit},
          {projectionMap(ctx, 4, {1, 3}), projectionMap(ctx, 4, {0, 2, 1, 3}),
           projectionMap(ctx, 4, {0, 1, 2})},
          {IteratorType::parallel, IteratorType::parallel,
           IteratorType::parallel, IteratorType::reduction},
          buildMultiplyAccumulateBody)
          .getResult(0);
  Value probs = attentionWeights(scores, dh);
  // context[n, h, c] = sum_j probs[n, h, j] v[n, j, h, c].
  Value contextInit = filledTensor(
      b, loc, {b.getIndexAttr(n), b.getIndexAttr(heads), b.getIndexAttr(dh)},
      floatConst(b, loc, f32, 0));
  Value context = linalg::GenericOp::create(
                      b, loc, contextInit.getType(), ValueRange{probs, v},
                      ValueRange{contextInit},
                      {projectionMap(ctx, 4, {0, 1, 2}),
                       projectionMap(ctx, 4, {0, 2, 1, 3}),
                       projectionMap(ctx, 4, {0, 1, 3})},
                      {IteratorType::parallel, IteratorType::parallel,
                       IteratorType::reduction, IteratorType::parallel},
                      buildMultiplyAccumulateBody)
                      .getResult(0);
  Value pooled =
      linear(tensor::CollapseShapeOp::create(
                 b, loc, context, ArrayRef<ReassociationIndices>{{0}, {1, 2}}),
             "map.attn.out");
  return add(pooled, mlp(norm(pooled, "map.ln"), "map.mlp"));
}

/// final_ln, pooling, pre-logits and the classifier: x [N*T, D] (or the
/// class tokens' rows [N, D]) -> logits [N, classes].
Value ForwardBuilder::head(Value x, bool classTokensOnly) {
  bool normPooled = model.finalNorm == "pooled";
  if (!normPooled)
    x = norm(x, "final_ln");
  Value pooled = classTokensOnly       ? x
                 : model.head == "map" ? mapPool(x)
                                       : pool(x);
  if (normPooled)
    pooled = norm(pooled, "final_ln");
  if (model.representationSize)
    pooled = mapScalars(linear(pooled, "pre_logits"),
                        [](OpBuilder &b, Location loc, Value v) {
                          return Value(math::TanhOp::create(b, loc, v));
                        });
  return linear(pooled, "head");
}
