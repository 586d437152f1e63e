//===- SharedExperts.cpp - Expert MLPs and shared experts -------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The expert op of a description's `moe.expert` (vmoe.expert_ffn for "mlp",
// vmoe.expert_swiglu for "swiglu"), and the shared experts of
// `moe.shared_experts` (SPEC §8): every token passes through each of them
// (the tokens broadcast into one buffer per shared expert, one expert op),
// and their outputs are added to the routed output in ascending order.
//
//===----------------------------------------------------------------------===//

#include "ForwardBuilder.h"

#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::frontend;

using utils::IteratorType;

/// The experts `prefix`.* on buffers [E, G, B, D].
Value ForwardBuilder::experts(Value buffers, const std::string &prefix,
                              const MoESettings &settings) {
  if (settings.expert == "swiglu")
    return ExpertSwiGLUOp::create(
        b, loc, buffers.getType(), buffers, weight(prefix + ".w_gate"),
        weight(prefix + ".w_up"), weight(prefix + ".w_down"));
  return ExpertFFNOp::create(
      b, loc, buffers.getType(), buffers, kernel(prefix + ".w1"),
      weight(prefix + ".b1"), kernel(prefix + ".w2"),
      weight(prefix + ".b2"),
      ActivationAttr::get(b.getContext(),
                          parseActivation(settings.activation)));
}

/// routed [M, D] + sum over the shared experts e (ascending) of
/// expert_e(x [M, D]).
Value ForwardBuilder::addSharedExperts(Value x, Value routed,
                                       const std::string &prefix,
                                       const MoESettings &settings) {
  MLIRContext *ctx = b.getContext();
  int64_t es = settings.sharedExperts;
  int64_t m = shape(x)[0], d = shape(x)[1];
  // Every shared expert's buffer holds all M tokens: [Es, 1, M, D].
  auto buffersType = RankedTensorType::get({es, 1, m, d}, f32);
  Value init = emptyTensor(b, loc,
                           {b.getIndexAttr(es), b.getIndexAttr(1),
                            b.getIndexAttr(m), b.getIndexAttr(d)},
                           f32);
  Value buffers =
      linalg::GenericOp::create(
          b, loc, buffersType, ValueRange{x}, ValueRange{init},
          {projectionMap(ctx, 4, {2, 3}), b.getMultiDimIdentityMap(4)},
          SmallVector<IteratorType>(4, IteratorType::parallel),
          [](OpBuilder &b, Location loc, ValueRange args) {
            linalg::YieldOp::create(b, loc, ValueRange{args[0]});
          })
          .getResult(0);
  Value y = experts(buffers, prefix + ".shared", settings);
  // routed + y[0] + y[1] + ...: the expert loop outermost, ascending.
  return linalg::GenericOp::create(
             b, loc, routed.getType(), ValueRange{y}, ValueRange{routed},
             {b.getMultiDimIdentityMap(4), projectionMap(ctx, 4, {2, 3})},
             {IteratorType::reduction, IteratorType::reduction,
              IteratorType::parallel, IteratorType::parallel},
             buildAccumulateBody)
      .getResult(0);
}
