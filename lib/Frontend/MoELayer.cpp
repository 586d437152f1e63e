//===- MoELayer.cpp - V-MoE layers ------------------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// A token choice MoE layer as the vmoe op chain route -> bpr_sort (BPR) ->
// capacity (runtime C) -> dispatch -> expert_ffn or expert_swiglu ->
// combine, plus its routing statistics; the other families are built by
// their own files, the shared experts by SharedExperts.cpp.
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

/// The MoE layer of x [M, D] at runtime ratio `ratio`, plus its shared
/// experts; for token choice, `stats` [E + 1] receives the kept choices per
/// expert and the dropped choices.
Value ForwardBuilder::moe(Value x, const std::string &prefix,
                          const MoESettings &settings, Value ratio,
                          Value &stats) {
  Value routed;
  if (settings.routing == "expert_choice")
    routed = expertChoice(x, prefix, settings, ratio, stats);
  else if (settings.routing == "soft")
    routed = softMoE(x, prefix, settings, stats);
  else
    routed = tokenChoice(x, prefix, settings, ratio, stats);
  if (settings.sharedExperts == 0)
    return routed;
  return addSharedExperts(x, routed, prefix, settings);
}

/// The class tokens' rows [N, D] of the MoE layer of x [N*T, D]. Token
/// choice layers whose groups hold whole images route every token but run
/// the experts on the class tokens only; the other families, and groups
/// that split images (moe.group_tokens), compute every row.
Value ForwardBuilder::moeClassTokens(Value x, const std::string &prefix,
                                     const MoESettings &settings, Value ratio,
                                     Value &stats) {
  if (settings.routing == "expert_choice" || settings.routing == "soft" ||
      model.tokensPerGroup() % model.tokensPerImage() != 0)
    return classTokens(moe(x, prefix, settings, ratio, stats));
  Value routed =
      tokenChoice(x, prefix, settings, ratio, stats, /*classTokensOnly=*/true);
  if (settings.sharedExperts == 0)
    return routed;
  return addSharedExperts(classTokens(x), routed, prefix, settings);
}

/// Every `step`-th row of v [G, S, C] from row 0, copied: [G, S / step, C]
/// (the map (g, j, c) -> (g, j * step, c) reads them in place).
static Value everyNthRow(OpBuilder &b, Location loc, Value v, int64_t step) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t g = type.getDimSize(0), s = type.getDimSize(1);
  int64_t c = type.getDimSize(2);
  MLIRContext *ctx = b.getContext();
  Value init = emptyTensor(
      b, loc, {b.getIndexAttr(g), b.getIndexAttr(s / step), b.getIndexAttr(c)},
      type.getElementType());
  AffineMap rows =
      AffineMap::get(3, 0,
                     {getAffineDimExpr(0, ctx), getAffineDimExpr(1, ctx) * step,
                      getAffineDimExpr(2, ctx)},
                     ctx);
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{v}, ValueRange{init},
             {rows, b.getMultiDimIdentityMap(3)},
             SmallVector<IteratorType>(3, IteratorType::parallel),
             [](OpBuilder &b, Location loc, ValueRange args) {
               linalg::YieldOp::create(b, loc, ValueRange{args[0]});
             })
      .getResult(0);
}

/// The class tokens' choices: ids [G, S, k] where slots >= 0, else -1 (a
/// choice the dispatch leaves out), every T-th token.
static Value keptClassTokenIds(OpBuilder &b, Location loc, Value ids,
                               Value slots, int64_t t) {
  Value classIds = everyNthRow(b, loc, ids, t);
  Value classSlots = everyNthRow(b, loc, slots, t);
  AffineMap id = b.getMultiDimIdentityMap(3);
  return linalg::GenericOp::create(
             b, loc, classIds.getType(), ValueRange{classSlots},
             ValueRange{classIds}, {id, id},
             SmallVector<IteratorType>(3, IteratorType::parallel),
             [](OpBuilder &b, Location loc, ValueRange args) {
               Value kept = arith::CmpIOp::create(
                   b, loc, arith::CmpIPredicate::sge, args[0],
                   i32Const(b, loc, 0));
               linalg::YieldOp::create(
                   b, loc,
                   ValueRange{arith::SelectOp::create(
                       b, loc, kept, args[1], i32Const(b, loc, -1))});
             })
      .getResult(0);
}

/// A token choice layer: route, BPR order, capacity, dispatch, the experts
/// (MLP or SwiGLU), combine. With `classTokensOnly`, the slots of every
/// token are assigned (assign_slots), then a second dispatch places only
/// the class tokens' kept choices (the others get expert -1): the experts
/// compute exactly the class tokens' rows, [N, D].
Value ForwardBuilder::tokenChoice(Value x, const std::string &prefix,
                                  const MoESettings &settings, Value ratio,
                                  Value &stats, bool classTokensOnly) {
  int64_t m = shape(x)[0], d = model.modelWidth;
  int64_t s = model.tokensPerGroup(), g = m / s;
  int64_t e = settings.numExperts, k = settings.k;
  MLIRContext *ctx = b.getContext();
  Value tokens = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({g, s, d}, f32), x,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  Value router = weight(prefix + ".router.kernel");
  // Training graphs: noisy gating, and the auxiliary losses of the same
  // noisy logits.
  Value noise;
  if (options.training)
    noise = trainingNoise(currentBlock, {g, s, e});
  auto route = RouteOp::create(b, loc, tokens, router, k,
                               settings.order == "topk_softmax"
                                   ? RouteOrder::topk_softmax
                                   : RouteOrder::softmax_topk,
                               settings.normalize);
  if (noise) {
    route->insertOperands(2, noise);
    route.setNoiseStdAttr(b.getF64FloatAttr(kTrainingNoiseStd));
    lossRows.push_back(groupMeanLosses(tokens, router, noise, k));
  }
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
  // description fixes B (moe.capacity, or B = S when dropless).
  Value capacity;
  if (!model.fixedCapacity())
    capacity = CapacityOp::create(
        b, loc, b.getIndexType(), ratio, static_cast<uint64_t>(k),
        static_cast<uint64_t>(e), static_cast<uint64_t>(s),
        static_cast<uint64_t>(maxCapacity), rule,
        static_cast<uint64_t>(settings.multipleOf));
  auto i32Tensor = [&](ArrayRef<int64_t> dims) {
    return RankedTensorType::get(dims, b.getI32Type());
  };
  if (classTokensOnly) {
    int64_t t = model.tokensPerImage(), images = s / t;
    auto assign = AssignSlotsOp::create(
        b, loc,
        TypeRange{i32Tensor({g, s, k}), i32Tensor({e, g, maxCapacity}),
                  i32Tensor({e, g})},
        route.getExpertIds(), order, capacity, numValidTokens);
    stats = routingStats(route.getExpertIds(), assign.getSlots(), e);
    // At most B kept choices per expert and group: none is dropped here.
    Value classIds =
        keptClassTokenIds(b, loc, route.getExpertIds(), assign.getSlots(), t);
    Value classRows = everyNthRow(b, loc, tokens, t);
    auto classDispatch = DispatchOp::create(
        b, loc, RankedTensorType::get({e, g, maxCapacity, d}, f32),
        i32Tensor({g, images, k}), classRows, classIds, /*order=*/Value(),
        /*runtime_capacity=*/Value(), /*num_valid=*/Value(),
        /*capacity_ratio=*/FloatAttr(), CapacityRuleAttr::get(ctx, rule),
        b.getI64IntegerAttr(settings.multipleOf),
        b.getI64IntegerAttr(maxCapacity));
    Value y = experts(classDispatch.getBuffers(), prefix, settings);
    Value out = CombineOp::create(
        b, loc, classRows.getType(), y, classIds, classDispatch.getSlots(),
        everyNthRow(b, loc, route.getWeights(), t));
    return tensor::CollapseShapeOp::create(
        b, loc, out, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  }
  auto dispatch = DispatchOp::create(
      b, loc, RankedTensorType::get({e, g, maxCapacity, d}, f32),
      i32Tensor({g, s, k}), tokens, route.getExpertIds(), order, capacity,
      numValidTokens, /*capacity_ratio=*/FloatAttr(),
      CapacityRuleAttr::get(ctx, rule),
      b.getI64IntegerAttr(settings.multipleOf),
      b.getI64IntegerAttr(maxCapacity));
  Value y = experts(dispatch.getBuffers(), prefix, settings);
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
