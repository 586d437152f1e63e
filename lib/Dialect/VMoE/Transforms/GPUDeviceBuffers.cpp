//===- GPUDeviceBuffers.cpp - vmoe-gpu-device-buffers -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Host buffers of the GPU path live in device memory (gpu.alloc without
// host_shared, i.e. cuMemAlloc/cuMemAllocAsync; never managed memory):
//
//   memref.alloc   (host)   -> gpu.alloc
//   memref.dealloc (host)   -> gpu.dealloc
//   memref.copy    (host)   -> gpu.memcpy (static, contiguous buffers)
//   memref.load    (host) whose value one later kernel alone uses, with
//                            nothing in between touching the memref: moved
//                            into that kernel
//   memref.get_global used by device code -> a device copy made once per
//                              call (gpu.alloc + gpu.memcpy from the host)
//   memref.alloc   (kernel) -> memref.alloca (the thread's private memory)
//
// Host code may not read or write memory itself any more: every remaining
// host memref.load/store is an error. gpu-async-region then threads one
// stream through the function's GPU ops.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEGPUDEVICEBUFFERSPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

/// True for ops that run on the device.
static bool inKernel(Operation *op) {
  return op->getParentOfType<gpu::LaunchOp>() ||
         op->getParentOfType<gpu::GPUFuncOp>();
}

/// Whether any use of `value` is in device code.
static bool usedInKernel(Value value) {
  return llvm::any_of(value.getUsers(),
                      [](Operation *user) { return inKernel(user); });
}

/// A gpu.alloc of the shape of `type` (dynamic sizes taken from `like`).
static Value allocateLike(OpBuilder &b, Location loc, MemRefType type,
                          Value like) {
  SmallVector<Value> sizes;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      sizes.push_back(memref::DimOp::create(b, loc, like, i));
  return gpu::AllocOp::create(b, loc, type, /*asyncToken=*/Type(),
                              /*asyncDependencies=*/ValueRange{}, sizes,
                              /*symbolOperands=*/ValueRange{},
                              /*hostShared=*/false)
      .getMemref();
}

/// Moves a host load whose value only one later kernel uses into that
/// kernel, when nothing in between touches the memref. Returns whether it
/// moved.
static bool sinkLoadIntoKernel(memref::LoadOp load) {
  gpu::LaunchOp launch;
  for (Operation *user : load->getUsers()) {
    auto owner = user->getParentOfType<gpu::LaunchOp>();
    if (!owner || (launch && owner != launch))
      return false;
    launch = owner;
  }
  if (!launch || launch->getBlock() != load->getBlock() ||
      !load->isBeforeInBlock(launch))
    return false;
  Value memref = load.getMemRef();
  for (Operation *op = load->getNextNode(); op != launch;
       op = op->getNextNode()) {
    bool touches = false;
    op->walk([&](Operation *inner) {
      touches |= llvm::is_contained(inner->getOperands(), memref);
    });
    if (touches)
      return false;
  }
  load->moveBefore(&launch.getBody().front().front());
  return true;
}

namespace mlir::vmoe {
namespace {

struct VMoEGPUDeviceBuffersPass
    : impl::VMoEGPUDeviceBuffersPassBase<VMoEGPUDeviceBuffersPass> {
  using Base::Base;

  void runOnOperation() override {
    // Scalars read on the host only to be passed to one kernel are read by
    // that kernel instead.
    SmallVector<memref::LoadOp> hostLoads;
    getOperation().walk([&](memref::LoadOp load) {
      if (!inKernel(load))
        hostLoads.push_back(load);
    });
    for (memref::LoadOp load : hostLoads)
      sinkLoadIntoKernel(load);

    SmallVector<memref::AllocOp> allocs, kernelAllocs;
    SmallVector<memref::DeallocOp> deallocs, kernelDeallocs;
    SmallVector<memref::CopyOp> copies;
    SmallVector<memref::GetGlobalOp> globals;
    Operation *hostAccess = nullptr;
    getOperation().walk([&](Operation *op) {
      bool device = inKernel(op);
      if (auto alloc = dyn_cast<memref::AllocOp>(op))
        (device ? kernelAllocs : allocs).push_back(alloc);
      else if (auto dealloc = dyn_cast<memref::DeallocOp>(op))
        (device ? kernelDeallocs : deallocs).push_back(dealloc);
      else if (auto copy = dyn_cast<memref::CopyOp>(op); copy && !device)
        copies.push_back(copy);
      else if (auto global = dyn_cast<memref::GetGlobalOp>(op);
               global && !device && usedInKernel(global))
        globals.push_back(global);
      else if (isa<memref::LoadOp, memref::StoreOp>(op) && !device &&
               !hostAccess)
        hostAccess = op;
    });
    if (hostAccess) {
      hostAccess->emitOpError(
          "in host code would access device memory (the GPU path keeps its "
          "buffers on the device; this loop was not mapped to a kernel)");
      return signalPassFailure();
    }
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
          alloc.getSymbolOperands(), /*hostShared=*/false);
    }
    for (memref::DeallocOp dealloc : deallocs) {
      rewriter.setInsertionPoint(dealloc);
      rewriter.replaceOpWithNewOp<gpu::DeallocOp>(
          dealloc, /*asyncToken=*/Type(), ValueRange{}, dealloc.getMemref());
    }
    for (memref::CopyOp copy : copies) {
      auto source = cast<MemRefType>(copy.getSource().getType());
      auto target = cast<MemRefType>(copy.getTarget().getType());
      if (!memref::isStaticShapeAndContiguousRowMajor(source) ||
          !memref::isStaticShapeAndContiguousRowMajor(target)) {
        copy.emitOpError("in host code must copy between contiguous buffers "
                         "on the GPU path");
        return signalPassFailure();
      }
      rewriter.setInsertionPoint(copy);
      rewriter.replaceOpWithNewOp<gpu::MemcpyOp>(
          copy, /*asyncToken=*/Type(), ValueRange{}, copy.getTarget(),
          copy.getSource());
    }
    // Constants read by kernels: a device copy, freed before each return.
    for (memref::GetGlobalOp global : globals) {
      auto type = global.getType();
      if (!type.getLayout().isIdentity() || !type.hasStaticShape()) {
        global.emitOpError("read by a GPU kernel must be a static, "
                           "contiguous constant");
        return signalPassFailure();
      }
      Location loc = global.getLoc();
      rewriter.setInsertionPointAfter(global);
      Value device = allocateLike(rewriter, loc, type, global);
      gpu::MemcpyOp::create(rewriter, loc, /*asyncToken=*/Type(),
                            ValueRange{}, device, global.getResult());
      rewriter.replaceUsesWithIf(global.getResult(), device,
                                 [](OpOperand &use) {
                                   return inKernel(use.getOwner());
                                 });
      auto func = getOperation();
      for (Block &block : func.getBody())
        if (auto ret = dyn_cast<func::ReturnOp>(block.getTerminator())) {
          rewriter.setInsertionPoint(ret);
          gpu::DeallocOp::create(rewriter, loc, /*asyncToken=*/Type(),
                                 ValueRange{}, device);
        }
    }
  }
};

} // namespace
} // namespace mlir::vmoe
