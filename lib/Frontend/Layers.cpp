//===- Layers.cpp - Building blocks of the model ----------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Weights as slices of the flat weight buffer, linear maps as linalg.generic
// contractions (reduction loop outside the output loop), LayerNorm as
// reductions over the last dim, elementwise helpers.
//
//===----------------------------------------------------------------------===//

#include "ForwardBuilder.h"

#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::frontend;

using utils::IteratorType;

/// The floats of weight tensor `name`, a 1-D slice of the weights buffer.
Value ForwardBuilder::flatWeight(const std::string &name) {
  const WeightTensor &tensor = layout.at(name);
  return tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get({tensor.numElements()}, f32), weights,
      ArrayRef<OpFoldResult>{b.getIndexAttr(tensor.offset)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(tensor.numElements())},
      unitStrides(b, 1));
}

/// The weight tensor `name` as a tensor of its shape.
Value ForwardBuilder::weight(const std::string &name) {
  const WeightTensor &tensor = layout.at(name);
  Value flat = flatWeight(name);
  if (tensor.shape.size() == 1)
    return flat;
  if (tensor.shape.empty()) // A scalar: the 0-d tensor.
    return tensor::CollapseShapeOp::create(
        b, loc, RankedTensorType::get({}, f32), flat,
        ArrayRef<ReassociationIndices>{});
  ReassociationIndices all;
  for (size_t i = 0; i < tensor.shape.size(); ++i)
    all.push_back(i);
  return tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(tensor.shape, f32), flat,
      ArrayRef<ReassociationIndices>{all});
}

/// x [M, K] . kernel [K, N] + bias [N].
Value ForwardBuilder::linear(Value x, const std::string &prefix) {
  Value w = kernel(prefix + ".kernel");
  Value bias = weight(prefix + ".bias");
  int64_t m = shape(x)[0];
  int64_t n = cast<RankedTensorType>(w.getType()).getDimSize(1);
  Value init = filledTensor(b, loc, {b.getIndexAttr(m), b.getIndexAttr(n)},
                            floatConst(b, loc, f32, 0));
  MLIRContext *ctx = b.getContext();
  Value product =
      linalg::GenericOp::create(
          b, loc, init.getType(), ValueRange{x, w}, ValueRange{init},
          {projectionMap(ctx, 3, {0, 1}), projectionMap(ctx, 3, {1, 2}),
           projectionMap(ctx, 3, {0, 2})},
          {IteratorType::parallel, IteratorType::reduction,
           IteratorType::parallel},
          buildMultiplyAccumulateBody)
          .getResult(0);
  return addBroadcastLast(product, bias);
}

/// x [..., N] + v [N] (v broadcast over the leading dims).
Value ForwardBuilder::addBroadcastLast(Value x, Value v) {
  unsigned rank = shape(x).size();
  AffineMap id = b.getMultiDimIdentityMap(rank);
  return linalg::GenericOp::create(
             b, loc, x.getType(), ValueRange{v}, ValueRange{x},
             {projectionMap(b.getContext(), rank, {rank - 1}), id},
             SmallVector<IteratorType>(rank, IteratorType::parallel),
             [](OpBuilder &b, Location loc, ValueRange args) {
               linalg::YieldOp::create(
                   b, loc,
                   ValueRange{arith::AddFOp::create(b, loc, args[1], args[0])});
             })
      .getResult(0);
}

/// a + b elementwise (same shape).
Value ForwardBuilder::add(Value lhs, Value rhs) {
  unsigned rank = shape(lhs).size();
  AffineMap id = b.getMultiDimIdentityMap(rank);
  Value init = emptyTensor(b, loc, mixedSizes(b, loc, lhs), f32);
  return linalg::GenericOp::create(
             b, loc, lhs.getType(), ValueRange{lhs, rhs}, ValueRange{init},
             {id, id, id},
             SmallVector<IteratorType>(rank, IteratorType::parallel),
             [](OpBuilder &b, Location loc, ValueRange args) {
               linalg::YieldOp::create(
                   b, loc,
                   ValueRange{arith::AddFOp::create(b, loc, args[0], args[1])});
             })
      .getResult(0);
}

/// v / sqrt(mean(v^2) + eps) for every row of v [M, D] (mean over D).
Value ForwardBuilder::divideByRms(Value v) {
  Value width = floatConst(b, loc, f32, static_cast<double>(shape(v).back()));
  // Row sums in any order (vector accumulators), as the reference's.
  Value squares = reduceLastDim(
      b, loc, v, 0.0, [](OpBuilder &b, Location loc, Value acc, Value x) {
        return reassociableAdd(b, loc, acc,
                               arith::MulFOp::create(b, loc, x, x));
      });
  Value eps = floatConst(b, loc, f32, model.layerNormEpsilon);
  Value one = floatConst(b, loc, f32, 1.0);
  Value inverse = mapScalars(squares, [&](OpBuilder &b, Location loc, Value s) {
    Value mean = arith::DivFOp::create(b, loc, s, width);
    Value root =
        math::SqrtOp::create(b, loc, arith::AddFOp::create(b, loc, mean, eps));
    return Value(arith::DivFOp::create(b, loc, one, root));
  });
  return mapWithRowValue(b, loc, v, inverse,
                         [](OpBuilder &b, Location loc, Value x, Value r) {
                           return Value(arith::MulFOp::create(b, loc, x, r));
                         });
}

/// normed * `prefix`.scale, plus `prefix`.bias when `withBias` (both [D],
/// broadcast over the rows).
Value ForwardBuilder::scaleRows(Value normed, const std::string &prefix,
                                bool withBias) {
  SmallVector<Value> params = {weight(prefix + ".scale")};
  if (withBias)
    params.push_back(weight(prefix + ".bias"));
  unsigned rank = shape(normed).size();
  AffineMap last = projectionMap(b.getContext(), rank, {rank - 1});
  SmallVector<AffineMap> maps(params.size(), last);
  maps.push_back(b.getMultiDimIdentityMap(rank));
  return linalg::GenericOp::create(
             b, loc, normed.getType(), params, ValueRange{normed}, maps,
             SmallVector<IteratorType>(rank, IteratorType::parallel),
             [&](OpBuilder &b, Location loc, ValueRange args) {
               Value out = arith::MulFOp::create(b, loc, args.back(), args[0]);
               if (withBias)
                 out = arith::AddFOp::create(b, loc, out, args[1]);
               linalg::YieldOp::create(b, loc, ValueRange{out});
             })
      .getResult(0);
}

/// LayerNorm over the last dim of x [M, D] with `prefix`.scale/.bias:
/// (x - mean) / sqrt(var + eps) * scale + bias, population variance.
Value ForwardBuilder::layerNorm(Value x, const std::string &prefix) {
  double d = static_cast<double>(shape(x).back());
  auto addFn = [](OpBuilder &b, Location loc, Value acc, Value v) {
    return reassociableAdd(b, loc, acc, v);
  };
  Value sums = reduceLastDim(b, loc, x, 0.0, addFn);
  Value width = floatConst(b, loc, f32, d);
  Value mean = mapScalars(sums, [&](OpBuilder &b, Location loc, Value s) {
    return Value(arith::DivFOp::create(b, loc, s, width));
  });
  Value centered = mapWithRowValue(
      b, loc, x, mean, [](OpBuilder &b, Location loc, Value v, Value m) {
        return Value(arith::SubFOp::create(b, loc, v, m));
      });
  return scaleRows(divideByRms(centered), prefix, /*withBias=*/true);
}

/// RMSNorm over the last dim of x [M, D] with `prefix`.scale:
/// x / sqrt(mean(x^2) + eps) * scale.
Value ForwardBuilder::rmsNorm(Value x, const std::string &prefix) {
  return scaleRows(divideByRms(x), prefix, /*withBias=*/false);
}

/// The model's norm layer (`norm`: LayerNorm or RMSNorm) of x [M, D].
Value ForwardBuilder::norm(Value x, const std::string &prefix) {
  return model.norm == "rmsnorm" ? rmsNorm(x, prefix) : layerNorm(x, prefix);
}

/// softmax(scores / sqrt(dh)) over the last dim (the keys).
Value ForwardBuilder::attentionWeights(Value scores, int64_t dh) {
  Value root = floatConst(b, loc, f32, std::sqrt(static_cast<double>(dh)));
  scores = mapScalars(scores, [&](OpBuilder &b, Location loc, Value s) {
    return Value(arith::DivFOp::create(b, loc, s, root));
  });
  return buildSoftmaxLastDim(b, loc, scores, /*reassociate=*/true);
}

/// fn(v) for every element of `input`.
Value ForwardBuilder::mapScalars(
    Value input, function_ref<Value(OpBuilder &, Location, Value)> fn) {
  unsigned rank = shape(input).size();
  AffineMap id = b.getMultiDimIdentityMap(rank);
  return linalg::GenericOp::create(
             b, loc, input.getType(), ValueRange{}, ValueRange{input}, {id},
             SmallVector<IteratorType>(rank, IteratorType::parallel),
             [&](OpBuilder &b, Location loc, ValueRange args) {
               linalg::YieldOp::create(b, loc, ValueRange{fn(b, loc, args[0])});
             })
      .getResult(0);
}
