//===- Passes.h - vmoe dialect passes ---------------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_DIALECT_VMOE_TRANSFORMS_PASSES_H
#define VMOE_DIALECT_VMOE_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::vmoe {

#define GEN_PASS_DECL
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"

} // namespace mlir::vmoe

#endif // VMOE_DIALECT_VMOE_TRANSFORMS_PASSES_H
