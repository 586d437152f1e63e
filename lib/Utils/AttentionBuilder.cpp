//===- AttentionBuilder.cpp - Attention as linalg.generic ops ---*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Heads stay a tensor dim instead of transposing q and v: q kᵀ and the
// product with v are contractions over [N, T, heads, dh] views, batched
// over images x heads (vmoe-vectorize-contractions runs them on the GEMM
// microkernel).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Utils/AttentionBuilder.h"

#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <cmath>

using namespace mlir;
using namespace mlir::vmoe;

using utils::IteratorType;

Value mlir::vmoe::buildAttentionWeights(OpBuilder &b, Location loc,
                                        Value scores, int64_t dh) {
  auto type = cast<RankedTensorType>(scores.getType());
  Type f32 = type.getElementType();
  Value root = floatConst(b, loc, f32, std::sqrt(static_cast<double>(dh)));
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  scores =
      linalg::GenericOp::create(
          b, loc, type, ValueRange{}, ValueRange{scores}, {id},
          SmallVector<IteratorType>(type.getRank(), IteratorType::parallel),
          [&](OpBuilder &b, Location loc, ValueRange args) {
            linalg::YieldOp::create(
                b, loc,
                ValueRange{arith::DivFOp::create(b, loc, args[0], root)});
          })
          .getResult(0);
  return buildSoftmaxLastDim(b, loc, scores, /*reassociate=*/true);
}

Value mlir::vmoe::buildAttentionGenerics(OpBuilder &b, Location loc, Value q,
                                         Value k, Value v,
                                         ContractionBodyFn product,
                                         bool copyKTransposed) {
  auto qType = cast<RankedTensorType>(q.getType());
  auto kType = cast<RankedTensorType>(k.getType());
  Type f32 = qType.getElementType();
  int64_t n = kType.getDimSize(0), t = kType.getDimSize(1);
  int64_t heads = kType.getDimSize(2), dh = kType.getDimSize(3);
  int64_t tq = qType.getDimSize(1);
  MLIRContext *ctx = b.getContext();
  Value kOperand = k;
  AffineMap kMap = projectionMap(ctx, 5, {0, 3, 1, 4});
  if (copyKTransposed) {
    // kT[n, h, c, j] = k[n, j, h, c], over loops (n, j, h, c): the reads
    // of k contiguous, the writes strided (vmoe-vectorize-transposes).
    // (With j innermost the CPU code gathered k with a stride of 3 D
    // floats: 45 cycles per element on Zen 4.)
    Value kTInit = emptyTensor(b, loc,
                               {b.getIndexAttr(n), b.getIndexAttr(heads),
                                b.getIndexAttr(dh), b.getIndexAttr(t)},
                               f32);
    kOperand =
        linalg::GenericOp::create(
            b, loc, kTInit.getType(), ValueRange{k}, ValueRange{kTInit},
            {b.getMultiDimIdentityMap(4), projectionMap(ctx, 4, {0, 2, 3, 1})},
            SmallVector<IteratorType>(4, IteratorType::parallel),
            [](OpBuilder &b, Location loc, ValueRange args) {
              linalg::YieldOp::create(b, loc, args[0]);
            })
            .getResult(0);
    kMap = projectionMap(ctx, 5, {0, 1, 4, 3});
  }
  // scores[n, h, i, j] = sum_c q[n, i, h, c] kT[n, h, c, j].
  Value scoresInit = filledTensor(b, loc,
                                  {b.getIndexAttr(n), b.getIndexAttr(heads),
                                   b.getIndexAttr(tq), b.getIndexAttr(t)},
                                  floatConst(b, loc, f32, 0));
  Value scores =
      linalg::GenericOp::create(b, loc, scoresInit.getType(),
                                ValueRange{q, kOperand}, ValueRange{scoresInit},
                                {projectionMap(ctx, 5, {0, 2, 1, 4}), kMap,
                                 projectionMap(ctx, 5, {0, 1, 2, 3})},
                                {IteratorType::parallel, IteratorType::parallel,
                                 IteratorType::parallel, IteratorType::parallel,
                                 IteratorType::reduction},
                                product)
          .getResult(0);
  Value probs = buildAttentionWeights(b, loc, scores, dh);
  // context[n, i, h, c] = sum_j probs[n, h, i, j] v[n, j, h, c]; loops
  // (n, h, i, j, c) keep the contiguous c innermost.
  Value contextInit = filledTensor(b, loc,
                                   {b.getIndexAttr(n), b.getIndexAttr(tq),
                                    b.getIndexAttr(heads), b.getIndexAttr(dh)},
                                   floatConst(b, loc, f32, 0));
  return linalg::GenericOp::create(
             b, loc, contextInit.getType(), ValueRange{probs, v},
             ValueRange{contextInit},
             {projectionMap(ctx, 5, {0, 1, 2, 3}),
              projectionMap(ctx, 5, {0, 3, 1, 4}),
              projectionMap(ctx, 5, {0, 2, 1, 4})},
             {IteratorType::parallel, IteratorType::parallel,
              IteratorType::parallel, IteratorType::reduction,
              IteratorType::parallel},
             product)
      .getResult(0);
}
