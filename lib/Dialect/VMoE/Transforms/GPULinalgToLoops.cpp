//===- GPULinalgToLoops.cpp - vmoe-gpu-linalg-to-loops ----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Loops for the GPU mapping: linalg ops inside a parallel loop run in one
// thread (sequential loops); other linalg ops become kernels of their own
// (scf.parallel over their parallel dims). scf.forall -> scf.parallel.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEGPULINALGTOLOOPSPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

namespace mlir::vmoe {
namespace {

struct VMoEGPULinalgToLoopsPass
    : impl::VMoEGPULinalgToLoopsPassBase<VMoEGPULinalgToLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : ops) {
      if (!op.hasPureBufferSemantics()) {
        op->emitOpError("expected buffer semantics (run after bufferization)");
        return signalPassFailure();
      }
      rewriter.setInsertionPoint(op);
      bool nested = op->getParentOfType<scf::ForallOp>() ||
                    op->getParentOfType<scf::ParallelOp>();
      if (!nested) {
        // One kernel: all parallel dims outside, the reductions inside one
        // thread (so no parallel loop ends up under a sequential one).
        FailureOr<linalg::GenericOp> generic =
            isa<linalg::GenericOp>(op.getOperation())
                ? FailureOr<linalg::GenericOp>(
                      cast<linalg::GenericOp>(op.getOperation()))
                : linalg::generalizeNamedOp(rewriter, op);
        if (failed(generic)) {
          op->emitOpError("cannot be generalized for GPU loops");
          return signalPassFailure();
        }
        SmallVector<unsigned> order;
        SmallVector<utils::IteratorType> iterators =
            generic->getIteratorTypesArray();
        for (unsigned d = 0; d < iterators.size(); ++d)
          if (iterators[d] == utils::IteratorType::parallel)
            order.push_back(d);
        for (unsigned d = 0; d < iterators.size(); ++d)
          if (iterators[d] != utils::IteratorType::parallel)
            order.push_back(d);
        op = cast<linalg::LinalgOp>(generic->getOperation());
        if (!llvm::is_sorted(order)) {
          FailureOr<linalg::GenericOp> interchanged =
              linalg::interchangeGenericOp(rewriter, *generic, order);
          if (failed(interchanged)) {
            op->emitOpError("cannot interchange its loops for the GPU");
            return signalPassFailure();
          }
          op = cast<linalg::LinalgOp>(interchanged->getOperation());
        }
        rewriter.setInsertionPoint(op);
      }
      if (nested ? failed(linalg::linalgOpToLoops(rewriter, op))
                 : failed(linalg::linalgOpToParallelLoops(rewriter, op))) {
        op->emitOpError("cannot be lowered to loops");
        return signalPassFailure();
      }
      rewriter.eraseOp(op);
    }
    SmallVector<scf::ForallOp> foralls;
    getOperation().walk([&](scf::ForallOp op) { foralls.push_back(op); });
    for (scf::ForallOp forall : foralls) {
      rewriter.setInsertionPoint(forall);
      if (failed(scf::forallToParallelLoop(rewriter, forall))) {
        forall->emitOpError("cannot become an scf.parallel");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
} // namespace mlir::vmoe
