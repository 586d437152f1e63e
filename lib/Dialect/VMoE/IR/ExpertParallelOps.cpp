//===- ExpertParallelOps.cpp - Expert parallelism op verifiers --*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Verifiers of vmoe.expert_shard, vmoe.exchange_dispatch and
// vmoe.exchange_combine (docs/Dialect.md, "Expert parallelism"). Each
// diagnostic implements one rule ID and names the operand and the numbers.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/IR/VMoE.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

#include <string>

using namespace mlir;
using namespace mlir::vmoe;

/// Formats a shape as `2x400x?` for diagnostics.
static std::string shapeText(ArrayRef<int64_t> shape) {
  std::string result;
  llvm::raw_string_ostream os(result);
  llvm::interleave(
      shape, os,
      [&](int64_t dim) {
        if (ShapedType::isDynamic(dim))
          os << "?";
        else
          os << dim;
      },
      "x");
  return result;
}

/// Whether `actual` matches `expected` where both are static.
static bool compatible(ArrayRef<int64_t> actual, ArrayRef<int64_t> expected) {
  if (actual.size() != expected.size())
    return false;
  for (auto [a, e] : llvm::zip_equal(actual, expected))
    if (!ShapedType::isDynamic(a) && !ShapedType::isDynamic(e) && a != e)
      return false;
  return true;
}

/// Static dim 0 (E) of `type`, divisible by `ranks` (expert_shard-C1,
/// exchange-C1).
static FailureOr<int64_t> verifyExperts(Operation *op, StringRef name,
                                        RankedTensorType type, int64_t ranks,
                                        int64_t rank) {
  if (rank >= 0 && type.getRank() != rank)
    return op->emitOpError(name) << " must have rank " << rank << ", got "
                                 << type.getRank();
  if (type.getRank() < 1)
    return op->emitOpError(name) << " must have rank >= 1";
  int64_t e = type.getDimSize(0);
  if (ShapedType::isDynamic(e))
    return op->emitOpError(name) << " dim 0 (experts) must be static";
  if (e % ranks != 0)
    return op->emitOpError(name) << " has " << e
                                 << " experts, not divisible by ranks ("
                                 << ranks << ")";
  return e;
}

LogicalResult ExpertShardOp::verify() {
  auto experts = getExperts().getType();
  auto ranks = static_cast<int64_t>(getRanks());
  FailureOr<int64_t> e =
      verifyExperts(getOperation(), "experts", experts, ranks, -1);
  if (failed(e))
    return failure();
  // expert_shard-C2.
  SmallVector<int64_t> expected(experts.getShape());
  expected[0] = *e / ranks;
  if (!compatible(getShard().getType().getShape(), expected))
    return emitOpError("shard must be ")
           << shapeText(expected) << ", got "
           << shapeText(getShard().getType().getShape());
  return success();
}

/// The rules shared by both exchanges: `tokenSide` is the E x G x B x D
/// tensor of this rank's groups, `expertSide` the E/R x R*G x B x D one.
template <typename OpTy>
static LogicalResult verifyExchange(OpTy op, RankedTensorType tokenSide,
                                    StringRef tokenName,
                                    RankedTensorType expertSide,
                                    StringRef expertName) {
  auto ranks = static_cast<int64_t>(op.getRanks());
  FailureOr<int64_t> e =
      verifyExperts(op.getOperation(), tokenName, tokenSide, ranks, 4);
  if (failed(e))
    return failure();
  // exchange-C2.
  auto ids = op.getExpertIds().getType(), slots = op.getSlots().getType();
  if (ids.getRank() != 3)
    return op.emitOpError("expert_ids must be G x S x k, got ")
           << shapeText(ids.getShape());
  if (slots.getShape() != ids.getShape())
    return op.emitOpError("slots must have the shape of expert_ids (")
           << shapeText(ids.getShape()) << "), got "
           << shapeText(slots.getShape());
  int64_t g = tokenSide.getDimSize(1);
  if (!compatible({ids.getDimSize(0)}, {g}))
    return op.emitOpError("expert_ids dim 0 (")
           << ids.getDimSize(0) << ") must equal the groups of " << tokenName
           << " (" << g << ")";
  // exchange-C3.
  SmallVector<int64_t> expected = {
      *e / ranks,
      ShapedType::isDynamic(g) ? ShapedType::kDynamic : ranks * g,
      tokenSide.getDimSize(2), tokenSide.getDimSize(3)};
  if (!compatible(expertSide.getShape(), expected))
    return op.emitOpError(expertName)
           << " must be " << shapeText(expected) << " (E / ranks x ranks * G "
           << "x B x D), got " << shapeText(expertSide.getShape());
  return success();
}

LogicalResult ExchangeDispatchOp::verify() {
  return verifyExchange(*this, getInput().getType(), "input",
                        getOutput().getType(), "output");
}

LogicalResult ExchangeCombineOp::verify() {
  return verifyExchange(*this, getOutput().getType(), "output",
                        getInput().getType(), "input");
}
