//===- UnshareFillInits.cpp - vmoe-unshare-fill-inits -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// A linalg.fill (of a tensor.empty) used as the destination operand of
// other ops is cloned right before each of them, so that one-shot
// bufferization fills each destination in place instead of copying one
// filled buffer into all of them, and the fill sits next to its consumer.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEUNSHAREFILLINITSPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

/// True when `use` is a destination (init) operand of its owner.
static bool isDestination(OpOperand &use) {
  auto dps = dyn_cast<DestinationStyleOpInterface>(use.getOwner());
  return dps && dps.isDpsInit(&use);
}

namespace mlir::vmoe {
namespace {

struct VMoEUnshareFillInitsPass
    : impl::VMoEUnshareFillInitsPassBase<VMoEUnshareFillInitsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<linalg::FillOp> fills;
    getOperation()->walk([&](linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics() &&
          fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
        fills.push_back(fill);
    });
    OpBuilder b(&getContext());
    for (linalg::FillOp fill : fills) {
      SmallVector<OpOperand *> destinations;
      for (OpOperand &use : fill->getResult(0).getUses())
        if (isDestination(use))
          destinations.push_back(&use);
      // A fill of its own right before each destination operand.
      Value empty = fill.getOutputs()[0];
      for (OpOperand *use : destinations) {
        b.setInsertionPoint(use->getOwner());
        IRMapping map;
        map.map(empty, b.clone(*empty.getDefiningOp())->getResult(0));
        use->set(b.clone(*fill, map)->getResult(0));
      }
      if (fill->use_empty()) {
        fill->erase();
        if (empty.use_empty())
          empty.getDefiningOp()->erase();
      }
    }
  }
};

} // namespace
} // namespace mlir::vmoe
