//===- Passes.h - vmoe conversion passes ------------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_CONVERSION_PASSES_H
#define VMOE_CONVERSION_PASSES_H

#include "vmoe/Conversion/VMoEToSCF/VMoEToSCF.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::vmoe {

#define GEN_PASS_DECL
#include "vmoe/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "vmoe/Conversion/Passes.h.inc"

} // namespace mlir::vmoe

#endif // VMOE_CONVERSION_PASSES_H
