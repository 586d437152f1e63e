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

#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Utils/AttentionBuilder.h"
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
    return tensor::CollapseShapeOp::create(b, loc,
                                           RankedTensorType::get({}, f32), flat,
                                           ArrayRef<ReassociationIndices>{});
  ReassociationIndices all;
  for (size_t i = 0; i < tensor.shape.size(); ++i)
    all.push_back(i);
  return tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(tensor.shape, f32), flat,
      ArrayRef<ReassociationIndices>{all});
}

/// x [M, K] . kernel [K, N] + bias [N] (or their `columns`).
Value ForwardBuilder::linear(Value x, const std::string &prefix,
                             std::optional<std::pair<int64_t, int64_t>> columns,
                             bool roundToBF16) {
  Value w = columns ? kernelColumns(prefix + ".kernel", columns->first,
                                    columns->second)
                    : kernel(prefix + ".kernel");
  Value bias = weight(prefix + ".bias");
  if (columns)
    bias = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({columns->second}, f32), bias,
        ArrayRef<OpFoldResult>{b.getIndexAttr(columns->first)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(columns->second)},
        unitStrides(b, 1));
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
  if (!roundToBF16)
    return addBroadcastLast(product, bias);
  // product + bias rounded into a bf16 tensor of its own (the GEMM's
  // epilogue out of place, vmoe-vectorize-contractions).
  Value rounded = emptyTensor(b, loc, {b.getIndexAttr(m), b.getIndexAttr(n)},
                              b.getBF16Type());
  return linalg::GenericOp::create(
             b, loc, rounded.getType(), ValueRange{product, bias},
             ValueRange{rounded},
             {b.getMultiDimIdentityMap(2), projectionMap(ctx, 2, {1}),
              b.getMultiDimIdentityMap(2)},
             SmallVector<IteratorType>(2, IteratorType::parallel),
             [](OpBuilder &b, Location loc, ValueRange args) {
               Value sum = arith::AddFOp::create(b, loc, args[0], args[1]);
               linalg::YieldOp::create(b, loc,
                                       ValueRange{arith::TruncFOp::create(
                                           b, loc, b.getBF16Type(), sum)});
             })
      .getResult(0);
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

/// a + b elementwise (same shape), into b's buffer: b is a layer's
/// output (the residual branch), and when that is a GEMM's in place result
/// (attention's out projection) vmoe-vectorize-contractions folds this add
/// into the GEMM's epilogue.
Value ForwardBuilder::add(Value lhs, Value rhs) {
  unsigned rank = shape(lhs).size();
  AffineMap id = b.getMultiDimIdentityMap(rank);
  return linalg::GenericOp::create(
             b, loc, rhs.getType(), ValueRange{lhs}, ValueRange{rhs}, {id, id},
             SmallVector<IteratorType>(rank, IteratorType::parallel),
             [](OpBuilder &b, Location loc, ValueRange args) {
               linalg::YieldOp::create(
                   b, loc,
                   ValueRange{arith::AddFOp::create(b, loc, args[0], args[1])});
             })
      .getResult(0);
}

/// The norm of every row of x [M, D] in two passes over x after the mean:
/// r = 1 / sqrt(mean((x - m)^2) + eps) per row (a reduction reading x and
/// m), then one pass (x - m) * r * `prefix`.scale (+ `prefix`.bias). `mean`
/// [M] is null for RMSNorm (m = 0: no subtraction). The operations and
/// their order are those of centering, dividing and scaling in turn.
Value ForwardBuilder::normalizeRows(Value x, Value mean,
                                    const std::string &prefix, bool withBias) {
  MLIRContext *ctx = b.getContext();
  int64_t m = shape(x)[0], d = shape(x)[1];
  Value width = floatConst(b, loc, f32, static_cast<double>(d));
  AffineMap id2 = b.getMultiDimIdentityMap(2);
  AffineMap row = projectionMap(ctx, 2, {0}),
            column = projectionMap(ctx, 2, {1});
  auto centered = [&](OpBuilder &b, Location loc, ValueRange args) {
    return mean ? Value(arith::SubFOp::create(b, loc, args[0], args[1]))
                : args[0];
  };
  SmallVector<Value> rowInputs = {x};
  SmallVector<AffineMap> rowMaps = {id2};
  if (mean) {
    rowInputs.push_back(mean);
    rowMaps.push_back(row);
  }
  // Sum of squares per row, in any order (vector accumulators), as the
  // reference's.
  Value zeros =
      filledTensor(b, loc, {b.getIndexAttr(m)}, floatConst(b, loc, f32, 0));
  SmallVector<AffineMap> sumMaps = rowMaps;
  sumMaps.push_back(row);
  Value squares =
      linalg::GenericOp::create(
          b, loc, zeros.getType(), rowInputs, ValueRange{zeros}, sumMaps,
          {IteratorType::parallel, IteratorType::reduction},
          [&](OpBuilder &b, Location loc, ValueRange args) {
            Value v = centered(b, loc, args);
            linalg::YieldOp::create(
                b, loc,
                ValueRange{reassociableAdd(
                    b, loc, args.back(), arith::MulFOp::create(b, loc, v, v))});
          })
          .getResult(0);
  Value eps = floatConst(b, loc, f32, model.layerNormEpsilon);
  Value one = floatConst(b, loc, f32, 1.0);
  Value inverse = mapScalars(squares, [&](OpBuilder &b, Location loc, Value s) {
    Value meanSquare = arith::DivFOp::create(b, loc, s, width);
    Value root = math::SqrtOp::create(
        b, loc, arith::AddFOp::create(b, loc, meanSquare, eps));
    return Value(arith::DivFOp::create(b, loc, one, root));
  });
  // (x - m) * r * scale (+ bias).
  SmallVector<Value> inputs = rowInputs;
  SmallVector<AffineMap> maps = rowMaps;
  inputs.append({inverse, weight(prefix + ".scale")});
  maps.append({row, column});
  if (withBias) {
    inputs.push_back(weight(prefix + ".bias"));
    maps.push_back(column);
  }
  maps.push_back(id2);
  Value init = emptyTensor(b, loc, {b.getIndexAttr(m), b.getIndexAttr(d)}, f32);
  unsigned r = rowInputs.size();
  auto normalize = linalg::GenericOp::create(
      b, loc, init.getType(), inputs, ValueRange{init}, maps,
      {IteratorType::parallel, IteratorType::parallel},
      [&](OpBuilder &b, Location loc, ValueRange args) {
        Value out =
            arith::MulFOp::create(b, loc, centered(b, loc, args), args[r]);
        out = arith::MulFOp::create(b, loc, out, args[r + 1]);
        if (withBias)
          out = arith::AddFOp::create(b, loc, out, args[r + 2]);
        linalg::YieldOp::create(b, loc, ValueRange{out});
      });
  // Read in full by every thread of the next GEMM: written with
  // non-temporal stores where the runtime finds that cheaper
  // (vmoe-streaming-stores).
  normalize->setAttr(kStreamingStoresAttrName, b.getUnitAttr());
  return normalize.getResult(0);
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
  return normalizeRows(x, mean, prefix, /*withBias=*/true);
}

/// RMSNorm over the last dim of x [M, D] with `prefix`.scale:
/// x / sqrt(mean(x^2) + eps) * scale.
Value ForwardBuilder::rmsNorm(Value x, const std::string &prefix) {
  return normalizeRows(x, Value(), prefix, /*withBias=*/false);
}

/// The model's norm layer (`norm`: LayerNorm or RMSNorm) of x [M, D].
Value ForwardBuilder::norm(Value x, const std::string &prefix) {
  return model.norm == "rmsnorm" ? rmsNorm(x, prefix) : layerNorm(x, prefix);
}

/// softmax(scores / sqrt(dh)) over the last dim (the keys).
Value ForwardBuilder::attentionWeights(Value scores, int64_t dh) {
  return buildAttentionWeights(b, loc, scores, dh);
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
