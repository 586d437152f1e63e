//===- DeallocAtExit.cpp - vmoe-dealloc-at-exit -----------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Frees the entry-block buffers of a function before each return.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEDEALLOCATEXITPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

/// True when `value` (or a view of it) is returned or stored as a value.
static bool escapes(Value value) {
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (isa<func::ReturnOp>(user))
      return true;
    if (auto store = dyn_cast<memref::StoreOp>(user);
        store && store.getValueToStore() == value)
      return true;
    if (auto view = dyn_cast<ViewLikeOpInterface>(user))
      if (view.getViewSource() == value && escapes(view->getResult(0)))
        return true;
  }
  return false;
}

namespace mlir::vmoe {
namespace {

struct VMoEDeallocAtExitPass
    : impl::VMoEDeallocAtExitPassBase<VMoEDeallocAtExitPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<memref::AllocOp> allocs;
    for (Operation &op : func.front()) {
      auto alloc = dyn_cast<memref::AllocOp>(op);
      // Buffers freed already are left as they are.
      if (alloc && llvm::none_of(alloc->getUsers(), [](Operation *user) {
            return isa<memref::DeallocOp>(user);
          }))
        allocs.push_back(alloc);
    }
    for (memref::AllocOp alloc : allocs)
      if (escapes(alloc.getResult())) {
        alloc.emitOpError("escapes its function; cannot free it at exit");
        return signalPassFailure();
      }
    func.walk([&](func::ReturnOp ret) {
      OpBuilder b(ret);
      for (memref::AllocOp alloc : allocs)
        memref::DeallocOp::create(b, ret.getLoc(), alloc.getResult());
    });
  }
};

} // namespace
} // namespace mlir::vmoe
