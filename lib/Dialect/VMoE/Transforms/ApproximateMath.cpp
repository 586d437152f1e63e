//===- ApproximateMath.cpp - vmoe-approximate-math --------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Applies the upstream polynomial approximations of math functions, so that
// activations and softmaxes vectorize on the CPU.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEAPPROXIMATEMATHPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

namespace mlir::vmoe {
namespace {

struct VMoEApproximateMathPass
    : impl::VMoEApproximateMathPassBase<VMoEApproximateMathPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::vmoe
