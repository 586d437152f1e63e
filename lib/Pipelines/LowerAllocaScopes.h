//===- LowerAllocaScopes.h - alloca scopes to stack save/restore -*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Internal to lib/Pipelines (a step of vmoe-lower-to-cpu).
//
//===----------------------------------------------------------------------===//

#ifndef LIB_PIPELINES_LOWERALLOCASCOPES_H
#define LIB_PIPELINES_LOWERALLOCASCOPES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlir::vmoe {

/// func pass: every memref.alloca_scope becomes its body, between
/// llvm.intr.stacksave and stackrestore when it holds a memref.alloca.
std::unique_ptr<Pass> createLowerAllocaScopesPass();

} // namespace mlir::vmoe

#endif // LIB_PIPELINES_LOWERALLOCASCOPES_H
