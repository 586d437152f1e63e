//===- ExpertChoiceLayer.cpp - Expert choice MoE layers ---------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// An expert choice layer (SPEC §8) as capacity (runtime C, k = 1) ->
// expert_choice -> expert_choice_experts, plus its routing statistics: the
// histogram of experts per token.
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

/// [E + 1] i32: entry j counts the tokens g * S + t < numValid (padding
/// excluded) taken by exactly j experts (`slots` is G x S x E, -1 where an
/// expert did not take the token).
static Value expertsPerTokenHistogram(OpBuilder &b, Location loc, Value slots,
                                      int64_t e, Value numValid) {
  MLIRContext *ctx = b.getContext();
  Type i32 = b.getI32Type();
  auto slotsType = cast<RankedTensorType>(slots.getType());
  int64_t g = slotsType.getDimSize(0), s = slotsType.getDimSize(1);
  auto add = [&](OpBuilder &b, Location loc, Value acc, Value bit) {
    return arith::AddIOp::create(b, loc, acc,
                                 arith::ExtUIOp::create(b, loc, i32, bit));
  };
  Value counts = filledTensor(b, loc, {b.getIndexAttr(g), b.getIndexAttr(s)},
                              i32Const(b, loc, 0));
  counts = linalg::GenericOp::create(
               b, loc, counts.getType(), ValueRange{slots}, ValueRange{counts},
               {b.getMultiDimIdentityMap(3), projectionMap(ctx, 3, {0, 1})},
               {IteratorType::parallel, IteratorType::parallel,
                IteratorType::reduction},
               [&](OpBuilder &b, Location loc, ValueRange args) {
                 Value taken = arith::CmpIOp::create(
                     b, loc, arith::CmpIPredicate::sge, args[0],
                     i32Const(b, loc, 0));
                 linalg::YieldOp::create(
                     b, loc, ValueRange{add(b, loc, args[1], taken)});
               })
               .getResult(0);
  Value histogram = filledTensor(b, loc, {b.getIndexAttr(e + 1)},
                                 i32Const(b, loc, 0));
  return linalg::GenericOp::create(
             b, loc, histogram.getType(), ValueRange{counts},
             ValueRange{histogram},
             {projectionMap(ctx, 3, {0, 1}), projectionMap(ctx, 3, {2})},
             {IteratorType::reduction, IteratorType::reduction,
              IteratorType::parallel},
             [&](OpBuilder &b, Location loc, ValueRange args) {
               Value bin = arith::IndexCastOp::create(
                   b, loc, i32, linalg::IndexOp::create(b, loc, 2));
               Value position = arith::AddIOp::create(
                   b, loc,
                   arith::MulIOp::create(b, loc,
                                         linalg::IndexOp::create(b, loc, 0),
                                         indexConst(b, loc, s)),
                   linalg::IndexOp::create(b, loc, 1));
               Value mine = arith::AndIOp::create(
                   b, loc,
                   arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         args[0], bin),
                   arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                         position, numValid));
               linalg::YieldOp::create(b, loc,
                                       ValueRange{add(b, loc, args[1], mine)});
             })
      .getResult(0);
}

Value ForwardBuilder::expertChoice(Value x, const std::string &prefix,
                                   const MoESettings &layer, Value ratio,
                                   Value &stats) {
  int64_t m = shape(x)[0], d = model.modelWidth;
  int64_t s = model.tokensPerGroup(), g = m / s;
  int64_t e = model.moe.numExperts;
  Value tokens = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({g, s, d}, f32), x,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  auto rule = layer.capacityRule == "ceil" ? CapacityRule::ceil
                                           : CapacityRule::round;
  int64_t maxCapacity =
      moeLayerCapacity(model, layer, maxCapacityRatio(model, options));
  // The runtime capacity ratio sets B up to the compiled maximum, unless the
  // description fixes B (moe.capacity): then every expert takes B tokens.
  Value capacity =
      model.fixedCapacity()
          ? Value(arith::ConstantIndexOp::create(b, loc, maxCapacity))
          : Value(CapacityOp::create(
                b, loc, b.getIndexType(), ratio, /*k=*/1,
                static_cast<uint64_t>(e), static_cast<uint64_t>(s),
                static_cast<uint64_t>(maxCapacity), rule,
                static_cast<uint64_t>(layer.multipleOf)));
  auto route = ExpertChoiceOp::create(b, loc, tokens,
                                      weight(prefix + ".router.kernel"),
                                      maxCapacity, capacity, numValidTokens);
  Value out = ExpertChoiceExpertsOp::create(
      b, loc, tokens.getType(), tokens, route.getGates(), route.getTokenIds(),
      route.getSlots(), kernel(prefix + ".w1"), weight(prefix + ".b1"),
      kernel(prefix + ".w2"), weight(prefix + ".b2"),
      ActivationAttr::get(b.getContext(), parseActivation(layer.activation)),
      /*weight_panels=*/IntegerAttr());
  stats = expertsPerTokenHistogram(b, loc, route.getSlots(), e,
                                   numValidTokens);
  return tensor::CollapseShapeOp::create(
      b, loc, out, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
}
