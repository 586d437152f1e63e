//===- DenseMLP.cpp - Dense MLP blocks --------------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// A dense MLP is a single-expert vmoe.expert_ffn, so it shares the expert
// lowering (and its microkernel) with the MoE layers; its kernels come in
// panel layout when stored packed (WeightPanels.cpp).
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

/// The dense MLP of x [M, D]: a single-expert vmoe.expert_ffn.
Value ForwardBuilder::mlp(Value x, const std::string &prefix) {
  int64_t m = shape(x)[0], d = model.modelWidth, h = model.mlpDim;
  auto expand = [&](Value v, ArrayRef<int64_t> newShape,
                    ArrayRef<ReassociationIndices> groups) {
    return Value(tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(newShape, f32), v, groups));
  };
  Value buffers = expand(x, {1, 1, m, d}, {{0, 1, 2}, {3}});
  Value w1 = kernel(prefix + ".fc1.kernel", {1, d, h});
  Value b1 = expand(weight(prefix + ".fc1.bias"), {1, h}, {{0, 1}});
  Value w2 = kernel(prefix + ".fc2.kernel", {1, h, d});
  Value b2 = expand(weight(prefix + ".fc2.bias"), {1, d}, {{0, 1}});
  Value y = ExpertFFNOp::create(
      b, loc, buffers.getType(), buffers, w1, b1, w2, b2,
      ActivationAttr::get(b.getContext(),
                          parseActivation(model.mlpActivation)));
  return tensor::CollapseShapeOp::create(
      b, loc, y, ArrayRef<ReassociationIndices>{{0, 1, 2}, {3}});
}
