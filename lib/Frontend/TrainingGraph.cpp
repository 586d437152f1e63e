//===- TrainingGraph.cpp - Router noise and auxiliary losses ----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The training graph of `vmoe-compile --training --seed N` (SPEC §8,
// docs/ModelFormat.md "Training graphs"): standard normal router noise from
// a counter-based generator (splitmix64 of the seed, the block and the
// sample index, then Box-Muller in f64; python/vmoe_ref/noise.py computes
// the same numbers), and the per-layer means over groups of the auxiliary
// losses of vmoe.router_losses.
//
//===----------------------------------------------------------------------===//

#include "ForwardBuilder.h"

#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::frontend;

using utils::IteratorType;

/// splitmix64's finalizer, modulo 2^64.
uint64_t mlir::vmoe::frontend::splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// splitmix64 of an i64 value in IR (wrapping multiplications).
static Value emitSplitmix64(OpBuilder &b, Location loc, Value x) {
  auto constant = [&](uint64_t v) {
    return Value(arith::ConstantOp::create(
        b, loc, b.getI64IntegerAttr(static_cast<int64_t>(v))));
  };
  auto xorShift = [&](Value z, uint64_t shift) {
    return Value(arith::XOrIOp::create(
        b, loc, z, arith::ShRUIOp::create(b, loc, z, constant(shift))));
  };
  Value z = arith::AddIOp::create(b, loc, x, constant(0x9E3779B97F4A7C15ULL));
  z = arith::MulIOp::create(b, loc, xorShift(z, 30),
                            constant(0xBF58476D1CE4E5B9ULL));
  z = arith::MulIOp::create(b, loc, xorShift(z, 27),
                            constant(0x94D049BB133111EBULL));
  return xorShift(z, 31);
}

/// The noise [G, S, E] of MoE block `block`: sample i (row-major) is
/// sqrt(-2 ln u1) cos(2 pi u2) with u1 = ((h0 >> 11) + 1) / 2^53,
/// u2 = (h1 >> 11) / 2^53, h_j = splitmix64(splitmix64(seed) xor
/// ((block << 40) | (2 i + j))), in f64, rounded to f32.
Value ForwardBuilder::trainingNoise(int64_t block, ArrayRef<int64_t> dims) {
  Type i64 = b.getI64Type(), f64 = b.getF64Type();
  uint64_t key = splitmix64(options.seed);
  Value init = emptyTensor(b, loc,
                           {b.getIndexAttr(dims[0]), b.getIndexAttr(dims[1]),
                            b.getIndexAttr(dims[2])},
                           f32);
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{}, ValueRange{init},
             {b.getMultiDimIdentityMap(3)},
             SmallVector<IteratorType>(3, IteratorType::parallel),
             [&](OpBuilder &b, Location loc, ValueRange) {
               auto constant = [&](int64_t v) {
                 return Value(
                     arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v)));
               };
               auto index = [&](unsigned dim) {
                 return Value(arith::IndexCastOp::create(
                     b, loc, i64, linalg::IndexOp::create(b, loc, dim)));
               };
               // i = (g * S + s) * E + e
               Value i = arith::AddIOp::create(
                   b, loc,
                   arith::MulIOp::create(
                       b, loc,
                       arith::AddIOp::create(
                           b, loc,
                           arith::MulIOp::create(b, loc, index(0),
                                                 constant(dims[1])),
                           index(1)),
                       constant(dims[2])),
                   index(2));
               Value counter = arith::OrIOp::create(
                   b, loc, constant(block << 40),
                   arith::ShLIOp::create(b, loc, i, constant(1)));
               Value keyValue = constant(static_cast<int64_t>(key));
               auto draw = [&](Value c) {
                 Value h = emitSplitmix64(
                     b, loc, arith::XOrIOp::create(b, loc, keyValue, c));
                 return Value(arith::ShRUIOp::create(b, loc, h, constant(11)));
               };
               Value h0 = draw(counter);
               Value h1 =
                   draw(arith::OrIOp::create(b, loc, counter, constant(1)));
               Value scale = floatConst(b, loc, f64, 0x1p-53);
               Value u1 = arith::MulFOp::create(
                   b, loc,
                   arith::UIToFPOp::create(
                       b, loc, f64,
                       arith::AddIOp::create(b, loc, h0, constant(1))),
                   scale);
               Value u2 = arith::MulFOp::create(
                   b, loc, arith::UIToFPOp::create(b, loc, f64, h1), scale);
               Value radius = math::SqrtOp::create(
                   b, loc,
                   arith::MulFOp::create(b, loc, floatConst(b, loc, f64, -2.0),
                                         math::LogOp::create(b, loc, u1)));
               Value angle = arith::MulFOp::create(
                   b, loc, floatConst(b, loc, f64, 2.0 * llvm::numbers::pi),
                   u2);
               Value z = arith::MulFOp::create(
                   b, loc, radius, math::CosOp::create(b, loc, angle));
               linalg::YieldOp::create(
                   b, loc, ValueRange{arith::TruncFOp::create(b, loc, f32, z)});
             })
      .getResult(0);
}

/// [3]: the means over the groups of the importance, load and GShard
/// losses of router_losses(tokens, router, noise).
Value ForwardBuilder::groupMeanLosses(Value tokens, Value router, Value noise,
                                      int64_t k) {
  int64_t g = shape(tokens)[0];
  auto groupsType = RankedTensorType::get({g}, f32);
  auto losses = RouterLossesOp::create(
      b, loc, groupsType, groupsType, groupsType, tokens, router, noise,
      b.getI64IntegerAttr(k), b.getF64FloatAttr(kTrainingNoiseStd));
  Value row = emptyTensor(b, loc, {b.getIndexAttr(3)}, f32);
  for (auto [index, loss] : llvm::enumerate(losses->getResults())) {
    Value sum = filledTensor(b, loc, {}, floatConst(b, loc, f32, 0));
    sum =
        linalg::GenericOp::create(
            b, loc, sum.getType(), ValueRange{loss}, ValueRange{sum},
            {b.getMultiDimIdentityMap(1), AffineMap::get(1, 0, b.getContext())},
            {IteratorType::reduction}, buildAccumulateBody)
            .getResult(0);
    Value mean = arith::DivFOp::create(
        b, loc, tensor::ExtractOp::create(b, loc, sum, ValueRange{}),
        floatConst(b, loc, f32, static_cast<double>(g)));
    row = tensor::InsertOp::create(
        b, loc, mean, row,
        ValueRange{indexConst(b, loc, static_cast<int64_t>(index))});
  }
  return row;
}
