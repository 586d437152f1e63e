//===- TensorBuilders.cpp - Tensor-level IR building blocks -----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::vmoe;

Value mlir::vmoe::indexConst(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

Value mlir::vmoe::i32Const(OpBuilder &b, Location loc, int32_t value) {
  return arith::ConstantIntOp::create(b, loc, value, 32);
}

Value mlir::vmoe::floatConst(OpBuilder &b, Location loc, Type type,
                             double value) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    return arith::ConstantOp::create(
        b, loc, type,
        DenseElementsAttr::get(
            shaped, b.getFloatAttr(shaped.getElementType(), value)));
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, value));
}

SmallVector<OpFoldResult> mlir::vmoe::mixedSizes(OpBuilder &b, Location loc,
                                                 Value tensor) {
  return tensor::getMixedSizes(b, loc, tensor);
}

Value mlir::vmoe::emptyTensor(OpBuilder &b, Location loc,
                              ArrayRef<OpFoldResult> sizes, Type elementType) {
  return tensor::EmptyOp::create(b, loc, sizes, elementType);
}

Value mlir::vmoe::filledTensor(OpBuilder &b, Location loc,
                               ArrayRef<OpFoldResult> sizes, Value value) {
  Value empty = emptyTensor(b, loc, sizes, value.getType());
  return linalg::FillOp::create(b, loc, ValueRange{value}, ValueRange{empty})
      .getResult(0);
}

Value mlir::vmoe::readOnlyBuffer(OpBuilder &b, Location loc, Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  // Row-major strides; dynamic from the first dynamic inner size on.
  SmallVector<int64_t> strides(type.getRank(), 1);
  for (int64_t i = type.getRank() - 2; i >= 0; --i) {
    int64_t inner = type.getDimSize(i + 1);
    strides[i] = ShapedType::isDynamic(inner) ||
                         ShapedType::isDynamic(strides[i + 1])
                     ? ShapedType::kDynamic
                     : inner * strides[i + 1];
  }
  auto layout =
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, strides);
  return bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType(), layout),
      tensor, /*read_only=*/true);
}

SmallVector<OpFoldResult> mlir::vmoe::unitStrides(OpBuilder &b, int64_t rank) {
  return SmallVector<OpFoldResult>(rank, b.getIndexAttr(1));
}

Value mlir::vmoe::extractIndexOfDim(OpBuilder &b, Location loc, Value tensor,
                                    unsigned dim, int64_t index) {
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes;
  SmallVector<int64_t> shape;
  for (auto [d, size] : llvm::enumerate(type.getShape())) {
    sizes.push_back(b.getIndexAttr(d == dim ? 1 : size));
    if (d != dim)
      shape.push_back(size);
  }
  offsets[dim] = b.getIndexAttr(index);
  return tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), tensor,
      offsets, sizes, unitStrides(b, type.getRank()));
}

AffineMap mlir::vmoe::projectionMap(MLIRContext *ctx, unsigned numDims,
                                    ArrayRef<unsigned> dims) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d : dims)
    exprs.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(numDims, 0, exprs, ctx);
}

void mlir::vmoe::buildMultiplyAccumulateBody(OpBuilder &b, Location loc,
                                             ValueRange args) {
  Value product = arith::MulFOp::create(b, loc, args[0], args[1]);
  linalg::YieldOp::create(
      b, loc, ValueRange{arith::AddFOp::create(b, loc, args[2], product)});
}

void mlir::vmoe::buildAccumulateBody(OpBuilder &b, Location loc,
                                     ValueRange args) {
  linalg::YieldOp::create(
      b, loc, ValueRange{arith::AddFOp::create(b, loc, args[1], args[0])});
}

/// The dims 0 .. rank-2 (everything but the last).
static SmallVector<unsigned> leadingDims(unsigned rank) {
  SmallVector<unsigned> dims;
  for (unsigned d = 0; d + 1 < rank; ++d)
    dims.push_back(d);
  return dims;
}

Value mlir::vmoe::reduceLastDim(OpBuilder &b, Location loc, Value input,
                                double initial, ScalarFn combine) {
  auto type = cast<RankedTensorType>(input.getType());
  unsigned rank = type.getRank();
  SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, input);
  sizes.pop_back();
  Value init = filledTensor(
      b, loc, sizes, floatConst(b, loc, type.getElementType(), initial));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  iterators.back() = utils::IteratorType::reduction;
  MLIRContext *ctx = b.getContext();
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{input}, ValueRange{init},
             {b.getMultiDimIdentityMap(rank),
              projectionMap(ctx, rank, leadingDims(rank))},
             iterators,
             [&](OpBuilder &b, Location loc, ValueRange args) {
               linalg::YieldOp::create(
                   b, loc, ValueRange{combine(b, loc, args[1], args[0])});
             })
      .getResult(0);
}

Value mlir::vmoe::mapWithRowValue(OpBuilder &b, Location loc, Value input,
                                  Value perRow, ScalarFn fn) {
  auto type = cast<RankedTensorType>(input.getType());
  unsigned rank = type.getRank();
  Value init =
      emptyTensor(b, loc, mixedSizes(b, loc, input), type.getElementType());
  AffineMap id = b.getMultiDimIdentityMap(rank);
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{input, perRow},
             ValueRange{init},
             {id, projectionMap(b.getContext(), rank, leadingDims(rank)), id},
             SmallVector<utils::IteratorType>(rank,
                                              utils::IteratorType::parallel),
             [&](OpBuilder &b, Location loc, ValueRange args) {
               linalg::YieldOp::create(b, loc,
                                       ValueRange{fn(b, loc, args[0], args[1])});
             })
      .getResult(0);
}

Value mlir::vmoe::reassociableAdd(OpBuilder &b, Location loc, Value lhs,
                                  Value rhs) {
  auto add = arith::AddFOp::create(b, loc, lhs, rhs);
  add.setFastmath(arith::FastMathFlags::reassoc);
  return add;
}

Value mlir::vmoe::buildSoftmaxLastDim(OpBuilder &b, Location loc, Value input,
                                      bool reassociate) {
  double inf = std::numeric_limits<double>::infinity();
  Value rowMax = reduceLastDim(
      b, loc, input, -inf,
      [&](OpBuilder &b, Location loc, Value acc, Value v) {
        auto max = arith::MaximumFOp::create(b, loc, acc, v);
        if (reassociate)
          max.setFastmath(arith::FastMathFlags::reassoc);
        return Value(max);
      });
  Value exps = mapWithRowValue(
      b, loc, input, rowMax, [](OpBuilder &b, Location loc, Value v, Value m) {
        return Value(
            math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, v, m)));
      });
  Value sums = reduceLastDim(
      b, loc, exps, 0.0, [&](OpBuilder &b, Location loc, Value acc, Value v) {
        return reassociate ? reassociableAdd(b, loc, acc, v)
                           : Value(arith::AddFOp::create(b, loc, acc, v));
      });
  return mapWithRowValue(
      b, loc, exps, sums, [](OpBuilder &b, Location loc, Value v, Value sum) {
        return Value(arith::DivFOp::create(b, loc, v, sum));
      });
}

/// 2^t for f32 `t` (a scalar or a vector) without math.exp: t is clamped
/// to [-64, 64] (1 / (1 + 2^64) is 5e-20, and 2^-64 vanishes next to 1:
/// the logistic below needs no more range), split as n + f by
/// rounding to nearest with the 1.5 * 2^23 shift (f in [-0.5, 0.5]); 2^f
/// is a degree-5 polynomial (relative error 7.5e-8: least squares on
/// Chebyshev nodes, reweighted to the largest error), 2^n the exponent
/// field (n + 127) << 23, from the shifted sum's low bits. About 15 vector
/// ops, against math.exp's range reduction, checks and selects.
static Value buildExp2(OpBuilder &b, Location loc, Value t) {
  Type type = t.getType();
  Type intType = b.getI32Type();
  if (auto vectorType = dyn_cast<VectorType>(type))
    intType = VectorType::get(vectorType.getShape(), intType);
  auto c = [&](double value) { return floatConst(b, loc, type, value); };
  auto ci = [&](int32_t value) {
    TypedAttr attr = b.getI32IntegerAttr(value);
    if (auto shaped = dyn_cast<ShapedType>(intType))
      attr = DenseElementsAttr::get(shaped, attr);
    return Value(arith::ConstantOp::create(b, loc, intType, attr));
  };
  const double roundingShift = 12582912.0; // 1.5 * 2^23
  // Clamps as compare + select, which x86 takes as one vmaxps / vminps (a
  // NaN t becomes a bound).
  auto clamp = [&](arith::CmpFPredicate predicate, double bound) {
    Value cmp = arith::CmpFOp::create(b, loc, predicate, t, c(bound));
    t = arith::SelectOp::create(b, loc, cmp, t, c(bound));
  };
  clamp(arith::CmpFPredicate::OGT, -64.0);
  clamp(arith::CmpFPredicate::OLT, 64.0);
  Value shifted = arith::AddFOp::create(b, loc, t, c(roundingShift));
  Value n = arith::SubFOp::create(b, loc, shifted, c(roundingShift));
  Value f = arith::SubFOp::create(b, loc, t, n);
  Value p = c(0.0013276457320898771);
  for (double coefficient :
       {0.009675541892647743, 0.05550713464617729, 0.24022120237350464,
        0.6931469440460205, 1.0000001192092896})
    p = math::FmaOp::create(b, loc, p, f, c(coefficient));
  Value bits = arith::BitcastOp::create(b, loc, intType, shifted);
  bits = arith::ShLIOp::create(
      b, loc, arith::AddIOp::create(b, loc, bits, ci(127)), ci(23));
  return arith::MulFOp::create(b, loc, p,
                               arith::BitcastOp::create(b, loc, type, bits));
}

/// v * sigmoid(s(v)) with s(v) = v * (alpha + beta * v^2) and sigmoid(z) =
/// 1 / (1 + 2^(-z log2 e)), 2^. from buildExp2: about 20 vector ops
/// and one IEEE division, against math.tanh's rational approximation with
/// its clamps and selects, then the division of the tanh form.
static Value buildTimesLogistic(OpBuilder &b, Location loc, Value v,
                                double alpha, double beta) {
  Type type = v.getType();
  auto c = [&](double value) { return floatConst(b, loc, type, value); };
  Value scale = c(-alpha * M_LOG2E);
  if (beta != 0.0)
    scale = math::FmaOp::create(b, loc, arith::MulFOp::create(b, loc, v, v),
                                c(-beta * M_LOG2E), scale);
  Value t = arith::MulFOp::create(b, loc, v, scale);
  Value logistic = arith::DivFOp::create(
      b, loc, c(1.0),
      arith::AddFOp::create(b, loc, buildExp2(b, loc, t), c(1.0)));
  return arith::MulFOp::create(b, loc, v, logistic);
}

Value mlir::vmoe::buildActivation(OpBuilder &b, Location loc,
                                  Activation activation, Value v,
                                  bool roundedToBF16) {
  Type type = v.getType();
  auto c = [&](double value) { return floatConst(b, loc, type, value); };
  // Activations whose results are rounded to bf16 (the hidden of a bf16
  // pair GEMM) take the logistic forms: 0.5 (1 + tanh(u)) = sigmoid(2 u),
  // within a few f32 ulps of the tanh form, at about half its cost.
  const double geluScale = M_SQRT2 * M_2_SQRTPI * 0.5; // sqrt(2 / pi)
  if (roundedToBF16 && activation == Activation::gelu_tanh)
    return buildTimesLogistic(b, loc, v, 2 * geluScale,
                              2 * geluScale * 0.044715);
  if (roundedToBF16 && activation == Activation::silu)
    return buildTimesLogistic(b, loc, v, 1.0, 0.0);
  switch (activation) {
  case Activation::gelu_tanh: {
    // 0.5 * v * (1 + tanh(sqrt(2/pi) * (v + 0.044715 * v^3))).
    Value cube = arith::MulFOp::create(
        b, loc, arith::MulFOp::create(b, loc, v, v), v);
    Value inner = arith::AddFOp::create(
        b, loc, v, arith::MulFOp::create(b, loc, c(0.044715), cube));
    inner = arith::MulFOp::create(b, loc, c(geluScale), inner);
    Value t = math::TanhOp::create(b, loc, inner);
    Value half = arith::MulFOp::create(b, loc, c(0.5), v);
    return arith::MulFOp::create(b, loc, half,
                                 arith::AddFOp::create(b, loc, c(1.0), t));
  }
  case Activation::gelu_erf: {
    // v * 0.5 * (1 + erf(v / sqrt(2))).
    Value e = math::ErfOp::create(
        b, loc, arith::MulFOp::create(b, loc, v, c(M_SQRT1_2)));
    Value half = arith::MulFOp::create(b, loc, v, c(0.5));
    return arith::MulFOp::create(b, loc, half,
                                 arith::AddFOp::create(b, loc, c(1.0), e));
  }
  case Activation::relu:
    return arith::MaximumFOp::create(b, loc, v, c(0.0));
  case Activation::silu: {
    // v / (1 + exp(-v)).
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, v));
    return arith::DivFOp::create(b, loc, v,
                                 arith::AddFOp::create(b, loc, c(1.0), e));
  }
  }
  llvm_unreachable("unknown activation");
}

Value mlir::vmoe::buildChoiceSum(OpBuilder &b, Location loc, Value planes,
                               Value slots, Value x, int64_t k) {
  auto xType = cast<RankedTensorType>(x.getType());
  SmallVector<OpFoldResult> xSizes = mixedSizes(b, loc, x);
  SmallVector<Value> inputs;
  for (int64_t i = 0; i < k; ++i) {
    SmallVector<OpFoldResult> offsets = {b.getIndexAttr(i), b.getIndexAttr(0),
                                         b.getIndexAttr(0), b.getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), xSizes[0],
                                       xSizes[1], xSizes[2]};
    inputs.push_back(tensor::ExtractSliceOp::create(
        b, loc, xType, planes, offsets, sizes, unitStrides(b, 4)));
  }
  for (int64_t i = 0; i < k; ++i) {
    SmallVector<OpFoldResult> offsets = {b.getIndexAttr(0), b.getIndexAttr(0),
                                         b.getIndexAttr(i)};
    SmallVector<OpFoldResult> sizes = {xSizes[0], xSizes[1],
                                       b.getIndexAttr(1)};
    auto sliceType = RankedTensorType::get(
        {xType.getDimSize(0), xType.getDimSize(1)}, b.getI32Type());
    inputs.push_back(tensor::ExtractSliceOp::create(
        b, loc, sliceType, slots, offsets, sizes, unitStrides(b, 3)));
  }
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineMap> maps(k, b.getMultiDimIdentityMap(3));
  maps.append(k, projectionMap(ctx, 3, {0, 1}));
  maps.push_back(b.getMultiDimIdentityMap(3));
  Value init = emptyTensor(b, loc, xSizes, b.getF32Type());
  return linalg::GenericOp::create(
             b, loc, xType, inputs, ValueRange{init}, maps,
             SmallVector<utils::IteratorType>(3,
                                              utils::IteratorType::parallel),
             [&](OpBuilder &b, Location loc, ValueRange args) {
               Value zero = floatConst(b, loc, b.getF32Type(), 0);
               Value acc = zero;
               for (int64_t i = 0; i < k; ++i) {
                 Value kept = arith::CmpIOp::create(
                     b, loc, arith::CmpIPredicate::sge, args[k + i],
                     i32Const(b, loc, 0));
                 acc = arith::AddFOp::create(
                     b, loc, acc,
                     arith::SelectOp::create(b, loc, kept, args[i], zero));
               }
               linalg::YieldOp::create(b, loc, ValueRange{acc});
             })
      .getResult(0);
}
