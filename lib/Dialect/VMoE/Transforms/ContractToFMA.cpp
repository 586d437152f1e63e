//===- ContractToFMA.cpp - vmoe-contract-to-fma -----------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// addf(acc, mulf(a, b)) -> math.fma(a, b, acc) on f32, so that every backend
// accumulates contractions with one rounding per step, like the CPU
// microkernel.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOECONTRACTTOFMAPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

namespace {

struct AddOfMulToFMA : OpRewritePattern<arith::AddFOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(arith::AddFOp add,
                                PatternRewriter &rewriter) const override {
    if (!add.getType().isF32())
      return failure();
    for (unsigned i = 0; i < 2; ++i) {
      auto mul = add->getOperand(i).getDefiningOp<arith::MulFOp>();
      if (!mul || !mul->hasOneUse())
        continue;
      rewriter.replaceOpWithNewOp<math::FmaOp>(add, mul.getLhs(), mul.getRhs(),
                                               add->getOperand(1 - i));
      rewriter.eraseOp(mul);
      return success();
    }
    return failure();
  }
};

} // namespace

namespace mlir::vmoe {
namespace {

struct VMoEContractToFMAPass
    : impl::VMoEContractToFMAPassBase<VMoEContractToFMAPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<AddOfMulToFMA>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::vmoe
