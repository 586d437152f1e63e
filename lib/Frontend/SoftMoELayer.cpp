//===- SoftMoELayer.cpp - Soft MoE layers -----------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// A Soft MoE layer (SPEC §8) as one vmoe.soft_moe over groups of
// `soft_group_size` images (one image by default), with the slot
// parameters `phi` [D, E, P] and the scalar `scale` of the weights file.
//
//===----------------------------------------------------------------------===//

#include "ForwardBuilder.h"

#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::frontend;

Value ForwardBuilder::softMoE(Value x, const std::string &prefix,
                              const MoESettings &layer, Value &stats) {
  int64_t m = shape(x)[0], d = model.modelWidth;
  int64_t s = model.layerTokensPerGroup(layer), g = m / s;
  int64_t e = model.moe.numExperts, p = model.layerSlotsPerExpert(layer);
  Value tokens = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({g, s, d}, f32), x,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  Value out = SoftMoEOp::create(
      b, loc, tokens.getType(), tokens, weight(prefix + ".phi"),
      weight(prefix + ".scale"), kernel(prefix + ".w1"), weight(prefix + ".b1"),
      kernel(prefix + ".w2"), weight(prefix + ".b2"), numValidTokens,
      ActivationAttr::get(b.getContext(), parseActivation(layer.activation)),
      /*weight_panels=*/IntegerAttr());
  // Every expert processes its P slots of every group; nothing is dropped.
  Value row = filledTensor(b, loc, {b.getIndexAttr(e + 1)},
                           i32Const(b, loc, static_cast<int32_t>(p * g)));
  stats = tensor::InsertOp::create(b, loc, i32Const(b, loc, 0), row,
                                   ValueRange{indexConst(b, loc, e)});
  return tensor::CollapseShapeOp::create(
      b, loc, out, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
}
