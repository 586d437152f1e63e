//===- GPUHostSharedAllocs.cpp - vmoe-gpu-host-shared-allocs ----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Host memref.alloc/dealloc -> gpu.alloc host_shared / gpu.dealloc.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEGPUHOSTSHAREDALLOCSPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

/// True for ops that run on the device.
static bool inKernel(Operation *op) {
  return op->getParentOfType<gpu::LaunchOp>() ||
         op->getParentOfType<gpu::GPUFuncOp>();
}

namespace mlir::vmoe {
namespace {

struct VMoEGPUHostSharedAllocsPass
    : impl::VMoEGPUHostSharedAllocsPassBase<VMoEGPUHostSharedAllocsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<memref::AllocOp> allocs, kernelAllocs;
    SmallVector<memref::DeallocOp> deallocs, kernelDeallocs;
    getOperation().walk([&](Operation *op) {
      bool device = inKernel(op);
      if (auto alloc = dyn_cast<memref::AllocOp>(op))
        (device ? kernelAllocs : allocs).push_back(alloc);
      else if (auto dealloc = dyn_cast<memref::DeallocOp>(op))
        (device ? kernelDeallocs : deallocs).push_back(dealloc);
    });
    IRRewriter rewriter(&getContext());
    // Scratch of one GPU thread: its private stack.
    for (memref::DeallocOp dealloc : kernelDeallocs)
      rewriter.eraseOp(dealloc);
    for (memref::AllocOp alloc : kernelAllocs) {
      if (!alloc.getType().hasStaticShape()) {
        alloc.emitOpError("in a GPU kernel must have a static shape");
        return signalPassFailure();
      }
      rewriter.setInsertionPoint(alloc);
      rewriter.replaceOpWithNewOp<memref::AllocaOp>(alloc, alloc.getType());
    }
    for (memref::AllocOp alloc : allocs) {
      rewriter.setInsertionPoint(alloc);
      rewriter.replaceOpWithNewOp<gpu::AllocOp>(
          alloc, alloc.getType(), /*asyncToken=*/Type(),
          /*asyncDependencies=*/ValueRange{}, alloc.getDynamicSizes(),
          alloc.getSymbolOperands(), /*hostShared=*/true);
    }
    // gpu-to-llvm lowers the asynchronous form of gpu.dealloc: wrap it in
    // waits so that it stays synchronous.
    auto tokenType = gpu::AsyncTokenType::get(&getContext());
    for (memref::DeallocOp dealloc : deallocs) {
      rewriter.setInsertionPoint(dealloc);
      Location loc = dealloc.getLoc();
      Value ready = gpu::WaitOp::create(rewriter, loc, tokenType, ValueRange{})
                        .getAsyncToken();
      Value done = gpu::DeallocOp::create(rewriter, loc, tokenType,
                                          ValueRange{ready}, dealloc.getMemref())
                       .getAsyncToken();
      gpu::WaitOp::create(rewriter, loc, Type(), ValueRange{done});
      rewriter.eraseOp(dealloc);
    }
  }
};

} // namespace
} // namespace mlir::vmoe
