//===- MoELayer.cpp - V-MoE layers ------------------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// A token choice MoE layer as the vmoe op chain route -> bpr_sort (BPR) ->
// capacity (runtime C) -> dispatch -> expert_ffn -> combine, plus its
// routing statistics; the other families are built by their own files.
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

/// The MoE layer of x [M, D] at runtime ratio `ratio`; for token choice,
/// `stats` [E + 1] receives the kept choices per expert and the dropped
/// choices.
Value ForwardBuilder::moe(Value x, const std::string &prefix,
                          const MoESettings &settings, Value ratio,
                          Value &stats) {
  if (settings.routing == "expert_choice")
    return expertChoice(x, prefix, settings, ratio, stats);
  if (settings.routing == "soft")
    return softMoE(x, prefix, settings, stats);
  int64_t m = shape(x)[0], d = model.modelWidth;
  int64_t s = model.tokensPerGroup(), g = m / s;
  int64_t e = settings.numExperts, k = settings.k;
  MLIRContext *ctx = b.getContext();
  Value tokens = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({g, s, d}, f32), x,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  auto route = RouteOp::create(
      b, loc, tokens, weight(prefix + ".router.kernel"), k,
      settings.order == "topk_softmax" ? RouteOrder::topk_softmax
                                       : RouteOrder::softmax_topk,
      settings.normalize);
  Value order;
  if (settings.routing == "bpr") {
    bool sum = settings.score == "sum_topk";
    order =
        BPRSortOp::create(b, loc, route.getGates(),
                          sum ? PriorityScore::sum_topk : PriorityScore::max,
                          sum ? std::optional<int64_t>(k) : std::nullopt);
  }
  auto rule = settings.capacityRule == "ceil" ? CapacityRule::ceil
                                              : CapacityRule::round;
  int64_t maxCapacity =
      moeLayerCapacity(model, settings, maxCapacityRatio(model, options));
  // The runtime capacity ratio sets B up to the compiled maximum, unless the
  // description fixes B (moe.capacity).
  Value capacity;
  if (!settings.capacity)
    capacity = CapacityOp::create(
        b, loc, b.getIndexType(), ratio, static_cast<uint64_t>(k),
        static_cast<uint64_t>(e), static_cast<uint64_t>(s),
        static_cast<uint64_t>(maxCapacity), rule,
        static_cast<uint64_t>(settings.multipleOf));
  auto i32Tensor = [&](ArrayRef<int64_t> dims) {
    return RankedTensorType::get(dims, b.getI32Type());
  };
  auto dispatch = DispatchOp::create(
      b, loc, RankedTensorType::get({e, g, maxCapacity, d}, f32),
      i32Tensor({g, s, k}), tokens, route.getExpertIds(), order, capacity,
      numValidTokens, /*capacity_ratio=*/FloatAttr(),
      CapacityRuleAttr::get(ctx, rule),
      b.getI64IntegerAttr(settings.multipleOf),
      b.getI64IntegerAttr(maxCapacity));
  Value y = ExpertFFNOp::create(
      b, loc, dispatch.getBuffers().getType(), dispatch.getBuffers(),
      kernel(prefix + ".w1"), weight(prefix + ".b1"),
      kernel(prefix + ".w2"), weight(prefix + ".b2"),
      ActivationAttr::get(ctx, parseActivation(settings.activation)));
  Value out =
      CombineOp::create(b, loc, tokens.getType(), y, route.getExpertIds(),
                        dispatch.getSlots(), route.getWeights());
  stats = routingStats(route.getExpertIds(), dispatch.getSlots(), e);
  return tensor::CollapseShapeOp::create(
      b, loc, out, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
}

/// [E + 1] i32: kept choices per expert, then dropped choices.
Value ForwardBuilder::routingStats(Value ids, Value slots, int64_t e) {
  MLIRContext *ctx = b.getContext();
  Type i32 = b.getI32Type();
  Value counts = filledTensor(b, loc, {b.getIndexAttr(e)}, i32Const(b, loc, 0));
  counts =
      linalg::GenericOp::create(
          b, loc, counts.getType(), ValueRange{ids, slots}, ValueRange{counts},
          {projectionMap(ctx, 4, {0, 1, 2}), projectionMap(ctx, 4, {0, 1, 2}),
           projectionMap(ctx, 4, {3})},
          {IteratorType::reduction, IteratorType::reduction,
           IteratorType::reduction, IteratorType::parallel},
          [&](OpBuilder &b, Location loc, ValueRange args) {
            Value expert = arith::IndexCastOp::create(
                b, loc, i32, linalg::IndexOp::create(b, loc, 3));
            Value mine = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                               args[0], expert);
            Value kept =
                arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                      args[1], i32Const(b, loc, 0));
            Value both = arith::AndIOp::create(b, loc, mine, kept);
            Value one = arith::ExtUIOp::create(b, loc, i32, both);
            linalg::YieldOp::create(
                b, loc,
                ValueRange{arith::AddIOp::create(b, loc, args[2], one)});
          })
          .getResult(0);
  // Dropped: choices with slot -1 of tokens g * S + t < numValidTokens.
  Value dropped = filledTensor(b, loc, {}, i32Const(b, loc, 0));
  int64_t s = shape(slots)[1];
  dropped =
      linalg::GenericOp::create(
          b, loc, dropped.getType(), ValueRange{slots}, ValueRange{dropped},
          {b.getMultiDimIdentityMap(3), AffineMap::get(3, 0, ctx)},
          SmallVector<IteratorType>(3, IteratorType::reduction),
          [&](OpBuilder &b, Location loc, ValueRange args) {
            Value position = arith::AddIOp::create(
                b, loc,
                arith::MulIOp::create(b, loc,
                                      linalg::IndexOp::create(b, loc, 0),
                                      indexConst(b, loc, s)),
                linalg::IndexOp::create(b, loc, 1));
            Value lost = arith::AndIOp::create(
                b, loc,
                arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                      args[0], i32Const(b, loc, 0)),
                arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                      position, numValidTokens));
            Value one = arith::ExtUIOp::create(b, loc, i32, lost);
            linalg::YieldOp::create(
                b, loc,
                ValueRange{arith::AddIOp::create(b, loc, args[1], one)});
          })
          .getResult(0);
  Value row = emptyTensor(b, loc, {b.getIndexAttr(e + 1)}, i32);
  row = tensor::InsertSliceOp::create(
      b, loc, counts, row, ArrayRef<OpFoldResult>{b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(e)}, unitStrides(b, 1));
  Value total = tensor::ExtractOp::create(b, loc, dropped, ValueRange{});
  return tensor::InsertOp::create(b, loc, total, row,
                                  ValueRange{indexConst(b, loc, e)});
}
