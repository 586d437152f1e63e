//===- ScopeStackScratch.cpp - Free block scratch per iteration -*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// A step of vmoe-lower-to-cpu right after the buffer deallocation pipeline.
// The GEMMs that convert-vmoe-to-scf emits before bufferization (expert
// choice, Soft MoE, fused experts without weight panels) pack B into one
// block's scratch, a memref.alloca marked vmoe.stack_scratch at the start of
// a loop iteration (allocaBlockScratch, vmoe/Codegen/Microkernel.h). Nothing
// frees an alloca per iteration once the loops are lowered (scf.for and
// scf.forall bodies become plain blocks), and the deallocation pipeline
// rejects llvm.intr.stacksave, so the lowering cannot scope it itself: here
// each marked alloca gets an llvm.intr.stacksave just before it and an
// llvm.intr.stackrestore before the terminator of its block (one pair per
// block: the first scratch's save frees the later ones too). The scratch
// then lives on the stack of the thread running the iteration (OpenMP
// threads each their own) and its bytes are reused by the next iteration.
//
//===----------------------------------------------------------------------===//

#include "ScopeStackScratch.h"

#include "vmoe/Codegen/Microkernel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;

namespace {

struct ScopeStackScratchPass
    : PassWrapper<ScopeStackScratchPass, OperationPass<func::FuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ScopeStackScratchPass)

  StringRef getArgument() const final { return "vmoe-scope-stack-scratch"; }
  StringRef getDescription() const final {
    return "memref.alloca marked vmoe.stack_scratch -> between "
           "llvm.intr.stacksave and stackrestore around the rest of its "
           "block (internal step of vmoe-lower-to-cpu)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<LLVM::LLVMDialect>();
  }

  void runOnOperation() override {
    SmallVector<memref::AllocaOp> scratches;
    getOperation().walk([&](memref::AllocaOp alloca) {
      if (alloca->hasAttr(vmoe::kStackScratchAttrName))
        scratches.push_back(alloca);
    });
    OpBuilder b(&getContext());
    auto pointer = LLVM::LLVMPointerType::get(&getContext());
    // One save before the first scratch of a block (walk order is block
    // order) frees every later one of the block too.
    llvm::SmallPtrSet<Block *, 8> scoped;
    for (memref::AllocaOp alloca : scratches) {
      Block *block = alloca->getBlock();
      if (!block->mightHaveTerminator()) {
        alloca->emitOpError("stack scratch in a block without terminator");
        return signalPassFailure();
      }
      alloca->removeAttr(vmoe::kStackScratchAttrName);
      if (!scoped.insert(block).second)
        continue;
      Location loc = alloca.getLoc();
      b.setInsertionPoint(alloca);
      Value stack = LLVM::StackSaveOp::create(b, loc, pointer);
      b.setInsertionPoint(block->getTerminator());
      LLVM::StackRestoreOp::create(b, loc, stack);
    }
  }
};

} // namespace

std::unique_ptr<Pass> mlir::vmoe::createScopeStackScratchPass() {
  return std::make_unique<ScopeStackScratchPass>();
}
