//===- VMoEToSCF.cpp - convert-vmoe-to-scf ----------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The pass that lowers every vmoe op to tensor-level upstream IR, and the
// populate function that exposes its patterns to other pipelines.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Conversion/Passes.h"

#include "Patterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_CONVERTVMOETOSCFPASS
#include "vmoe/Conversion/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;
using namespace mlir::vmoe;

void mlir::vmoe::populateVMoEToSCFConversionPatterns(
    RewritePatternSet &patterns, const MicrokernelShape &shape) {
  lowering::populateRouteLoweringPatterns(patterns);
  lowering::populateDispatchLoweringPatterns(patterns);
  lowering::populateExpertLoweringPatterns(patterns);
  lowering::populateFusedRouteLoweringPatterns(patterns);
  lowering::populateFusedExpertsLoweringPatterns(patterns, shape);
  lowering::populateExpertChoiceLoweringPatterns(patterns, shape);
  lowering::populateSoftMoELoweringPatterns(patterns, shape);
  lowering::populateRouterLossesLoweringPatterns(patterns);
}

namespace mlir::vmoe {
namespace {

struct ConvertVMoEToSCFPass
    : impl::ConvertVMoEToSCFPassBase<ConvertVMoEToSCFPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<VMoEDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    if (lanes < 1 || tileRows < 1 || tileVectors < 1) {
      getOperation()->emitError("vector-width, tile-rows and tile-vectors "
                                "must be positive");
      return signalPassFailure();
    }
    RewritePatternSet patterns(ctx);
    populateVMoEToSCFConversionPatterns(
        patterns, MicrokernelShape{tileRows, tileVectors, lanes});
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::vmoe
