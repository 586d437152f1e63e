//===- RuntimeBufferFunctions.cpp - heap buffers from the runtime ---------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Compiled models allocate their intermediate buffers per call and free
// them at the end of their last use. With malloc, buffers above glibc's
// mmap threshold are mapped and unmapped on every call, and each call then
// pays a page fault and the kernel's zeroing per page (a fifth of the time
// of a V-MoE-S/32 forward at 32 images). The runtime's buffer cache keeps
// freed buffers for the next call instead; this pass points the generic
// allocation calls of finalize-memref-to-llvm at it.
//
//===----------------------------------------------------------------------===//

#include "RuntimeBufferFunctions.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;

namespace {

struct RuntimeBufferFunctionsPass
    : PassWrapper<RuntimeBufferFunctionsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(RuntimeBufferFunctionsPass)

  StringRef getArgument() const final {
    return "vmoe-runtime-buffer-functions";
  }
  StringRef getDescription() const final {
    return "MLIR's generic allocation functions -> the vmoe runtime's buffer "
           "cache (internal step of vmoe-lower-to-cpu{cached-buffers})";
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    static constexpr std::pair<StringLiteral, StringLiteral> kRenames[] = {
        {"_mlir_memref_to_llvm_alloc", "vmoe_buffer_alloc"},
        {"_mlir_memref_to_llvm_aligned_alloc", "vmoe_buffer_aligned_alloc"},
        {"_mlir_memref_to_llvm_free", "vmoe_buffer_free"}};
    for (auto [from, to] : kRenames) {
      auto function = module.lookupSymbol<LLVM::LLVMFuncOp>(from);
      if (!function)
        continue;
      if (!function.isExternal() || module.lookupSymbol(to)) {
        function.emitOpError() << "cannot become " << to
                               << ": it has a body or the name is taken";
        return signalPassFailure();
      }
      auto newName = StringAttr::get(&getContext(), to);
      if (failed(SymbolTable::replaceAllSymbolUses(function, newName,
                                                   module))) {
        function.emitOpError() << "cannot rename its uses to " << to;
        return signalPassFailure();
      }
      SymbolTable::setSymbolName(function, newName);
    }
  }
};

} // namespace

std::unique_ptr<Pass> mlir::vmoe::createRuntimeBufferFunctionsPass() {
  return std::make_unique<RuntimeBufferFunctionsPass>();
}
