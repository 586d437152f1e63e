//===- Head.cpp - Final LayerNorm, pooling and classifier -------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The class token or the mean over tokens, after the final LayerNorm, then
// the classifier.
//
//===----------------------------------------------------------------------===//

#include "ForwardBuilder.h"

#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::frontend;

using utils::IteratorType;

/// The class token, or the mean over tokens, of x [N*T, D] -> [N, D].
Value ForwardBuilder::pool(Value x) {
  int64_t n = batchImages(model, options), t = model.tokensPerImage();
  int64_t d = model.modelWidth;
  Value tokens = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({n, t, d}, f32), x,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  if (model.head == "token")
    return tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({n, d}, f32), tokens,
        ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0),
                               b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(n), b.getIndexAttr(1),
                               b.getIndexAttr(d)},
        unitStrides(b, 3));
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

/// final_ln, pooling and the classifier: x [N*T, D] -> logits [N, classes].
Value ForwardBuilder::head(Value x) {
  return linear(pool(layerNorm(x, "final_ln")), "head");
}
