//===- LowerStridedCopies.cpp - vmoe-lower-strided-copies -------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// memref.copy with a non-contiguous operand -> linalg.copy, so that the
// LLVM lowering never calls memrefCopy (a symbol of the MLIR runner
// utilities that compiled models do not link).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOELOWERSTRIDEDCOPIESPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

/// True for an identity-layout memref (lowered to memcpy by MemRefToLLVM).
static bool isContiguous(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  return memref && memref.getLayout().isIdentity();
}

namespace mlir::vmoe {
namespace {

struct VMoELowerStridedCopiesPass
    : impl::VMoELowerStridedCopiesPassBase<VMoELowerStridedCopiesPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation()->walk([&](memref::CopyOp copy) {
      if (!isContiguous(copy.getSource().getType()) ||
          !isContiguous(copy.getTarget().getType()))
        copies.push_back(copy);
    });
    IRRewriter rewriter(&getContext());
    for (memref::CopyOp copy : copies) {
      rewriter.setInsertionPoint(copy);
      rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(),
                                                  copy.getTarget());
    }
  }
};

} // namespace
} // namespace mlir::vmoe
