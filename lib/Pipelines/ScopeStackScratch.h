//===- ScopeStackScratch.h - Free block scratch per iteration ---*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Internal to lib/Pipelines (a step of vmoe-lower-to-cpu).
//
//===----------------------------------------------------------------------===//

#ifndef LIB_PIPELINES_SCOPESTACKSCRATCH_H
#define LIB_PIPELINES_SCOPESTACKSCRATCH_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlir::vmoe {

/// memref.alloca marked vmoe.stack_scratch -> between llvm.intr.stacksave
/// and stackrestore around the rest of its block.
std::unique_ptr<Pass> createScopeStackScratchPass();

} // namespace mlir::vmoe

#endif // LIB_PIPELINES_SCOPESTACKSCRATCH_H
