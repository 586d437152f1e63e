//===- LowerAllocaScopes.cpp - alloca scopes to stack save/restore -*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// A step of vmoe-lower-to-cpu after convert-scf-to-openmp, which wraps every
// parallel loop body in a memref.alloca_scope. convert-scf-to-cf cannot
// lower a scope whose body holds loops (its region must stay one block), and
// the canonicalizer would hoist the allocas of a scope out of the parallel
// loop (one buffer for all threads). The GEMM microkernel's packing scratch
// is such an alloca (vmoe/Codegen/Microkernel.h), so every scope becomes its
// body: between llvm.intr.stacksave and llvm.intr.stackrestore when it holds
// an alloca (each iteration frees its stack bytes), inlined as is otherwise.
//
//===----------------------------------------------------------------------===//

#include "LowerAllocaScopes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;

namespace {

struct LowerAllocaScopesPass
    : PassWrapper<LowerAllocaScopesPass, OperationPass<func::FuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LowerAllocaScopesPass)

  StringRef getArgument() const final { return "vmoe-lower-alloca-scopes"; }
  StringRef getDescription() const final {
    return "memref.alloca_scope -> its body between llvm.intr.stacksave and "
           "stackrestore (internal step of vmoe-lower-to-cpu)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<LLVM::LLVMDialect>();
  }

  void runOnOperation() override {
    // Post-order: inner scopes first.
    SmallVector<memref::AllocaScopeOp> scopes;
    getOperation().walk(
        [&](memref::AllocaScopeOp scope) { scopes.push_back(scope); });
    IRRewriter rewriter(&getContext());
    for (memref::AllocaScopeOp scope : scopes) {
      bool hasAlloca = false;
      scope.walk([&](memref::AllocaOp) { hasAlloca = true; });
      Location loc = scope.getLoc();
      rewriter.setInsertionPoint(scope);
      Value stack;
      if (hasAlloca)
        stack = LLVM::StackSaveOp::create(
            rewriter, loc, LLVM::LLVMPointerType::get(&getContext()));
      Block *body = &scope.getBodyRegion().front();
      auto terminator = cast<memref::AllocaScopeReturnOp>(body->getTerminator());
      SmallVector<Value> results(terminator.getResults());
      rewriter.eraseOp(terminator);
      rewriter.inlineBlockBefore(body, scope);
      if (stack)
        LLVM::StackRestoreOp::create(rewriter, loc, stack);
      rewriter.replaceOp(scope, results);
    }
  }
};

} // namespace

std::unique_ptr<Pass> mlir::vmoe::createLowerAllocaScopesPass() {
  return std::make_unique<LowerAllocaScopesPass>();
}
