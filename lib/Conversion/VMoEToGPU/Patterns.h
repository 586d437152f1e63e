//===- Patterns.h - Lowering patterns of convert-vmoe-to-gpu ----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Populate functions of the op families that VMoEToGPU.cpp does not lower
// itself. Internal to lib/Conversion/VMoEToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_CONVERSION_VMOETOGPU_PATTERNS_H
#define LIB_CONVERSION_VMOETOGPU_PATTERNS_H

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::vmoe {

/// assign_slots as a per-expert warp scan (AssignSlotsToGPU.cpp); marks it
/// illegal in `target`.
void populateAssignSlotsToGPUPatterns(ConversionTarget &target,
                                      RewritePatternSet &patterns);

} // namespace mlir::vmoe

#endif // LIB_CONVERSION_VMOETOGPU_PATTERNS_H
