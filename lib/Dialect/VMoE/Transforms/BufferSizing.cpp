//===- BufferSizing.cpp - Per-expert capacity sizing ------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe-buffer-sizing: computes the capacity B of every unsized vmoe.dispatch
// from its capacity ratio (SPEC §4) and makes the E x G x B x D buffer types
// static, through expert_ffn, so that later lowerings see static shapes.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "vmoe/Dialect/VMoE/IR/Capacity.h"
#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Support/Limits.h"
#include "vmoe/Support/OptionChecks.h"
#include "vmoe/Support/PassOptionChecks.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEBUFFERSIZINGPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;
using namespace mlir::vmoe;

/// Gives `value` the static type `newType` and keeps every user valid:
/// expert_ffn results follow their buffers, combine accepts any B, and other
/// users get a tensor.cast back to the type they saw before.
static void propagateStaticType(Value value, RankedTensorType newType) {
  auto oldType = cast<RankedTensorType>(value.getType());
  if (oldType == newType)
    return;
  value.setType(newType);
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : value.getUses())
    uses.push_back(&use);
  for (OpOperand *use : uses) {
    Operation *user = use->getOwner();
    if (auto ffn = dyn_cast<ExpertFFNOp>(user);
        ffn && use->getOperandNumber() == 0) {
      propagateStaticType(ffn.getOutput(), newType);
      continue;
    }
    if (isa<CombineOp>(user))
      continue;
    OpBuilder builder(user);
    auto cast = tensor::CastOp::create(builder, user->getLoc(), oldType, value);
    use->set(cast);
  }
}

namespace mlir::vmoe {
namespace {

struct VMoEBufferSizingPass
    : PassWithCheckedOptions<
          VMoEBufferSizingPass,
          impl::VMoEBufferSizingPassBase<VMoEBufferSizingPass>> {
  using PassWithCheckedOptions::PassWithCheckedOptions;

  /// The option values (0 keeps each dispatch's own).
  llvm::Error checkOptions() {
    if (llvm::Error e = ::vmoe::checkRatioOrZero("capacity-ratio",
                                                 capacityRatio))
      return e;
    return ::vmoe::checkRange("multiple-of", multipleOf, 0,
                              ::vmoe::limits::kMaxDimension);
  }

  /// Sizes one dispatch; emits a diagnostic and fails when it cannot.
  LogicalResult sizeDispatch(DispatchOp op) {
    OpBuilder builder(op);
    if (!op.getCapacity()) {
      if (capacityRatio > 0)
        op.setCapacityRatioAttr(builder.getF64FloatAttr(capacityRatio));
      if (multipleOf > 0)
        op.setMultipleOf(static_cast<uint64_t>(multipleOf));
      int64_t s = op.getX().getType().getDimSize(1);
      if (ShapedType::isDynamic(s))
        return op.emitOpError(
            "cannot size the buffers: 'x' dim 1 (tokens per group) is "
            "dynamic");
      double ratio = op.getCapacityRatioAttr().getValueAsDouble();
      int64_t k = op.getNumChoices(), e = op.getNumExperts();
      double raw = ::vmoe::rawCapacity(k, s, ratio, e);
      int64_t b = ::vmoe::roundCapacity(
          raw,
          op.getCapacityRule() == CapacityRule::ceil
              ? ::vmoe::CapacityRounding::Ceil
              : ::vmoe::CapacityRounding::Round,
          static_cast<int64_t>(op.getMultipleOf()));
      if (b < 1)
        return op.emitOpError()
               << "capacity rounds to 0 ("
               << ::vmoe::describeRawCapacity(k, s, ratio, e)
               << "); raise the capacity ratio";
      // vmoe-C2: B is a size.
      if (b > ::vmoe::limits::kMaxDimension)
        return op.emitOpError()
               << "capacity " << b << " ("
               << ::vmoe::describeRawCapacity(k, s, ratio, e)
               << ") is above the limit " << ::vmoe::limits::kMaxDimension
               << "; lower the capacity ratio";
      op.setCapacity(static_cast<uint64_t>(b));
      op.removeCapacityRatioAttr();
    }
    auto type = op.getBuffers().getType();
    SmallVector<int64_t> shape(type.getShape());
    shape[2] = static_cast<int64_t>(*op.getCapacity());
    propagateStaticType(op.getBuffers(), type.clone(shape));
    return success();
  }

  void runOnOperation() override {
    if (failed(verifyOptions()))
      return signalPassFailure();
    WalkResult result = getOperation().walk([&](DispatchOp op) {
      return failed(sizeDispatch(op)) ? WalkResult::interrupt()
                                      : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::vmoe
