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

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::vmoe {

/// assign_slots as a per-expert warp scan (AssignSlotsToGPU.cpp); marks it
/// illegal in `target`.
void populateAssignSlotsToGPUPatterns(ConversionTarget &target,
                                      RewritePatternSet &patterns);

/// memref.alloc of `type`; `sizes` holds a value for every dim of `type`,
/// of which those of its dynamic dims are used.
inline Value allocWithSizes(OpBuilder &b, Location loc, MemRefType type,
                            ArrayRef<Value> sizes) {
  SmallVector<Value> dynamic;
  for (auto [size, value] : llvm::zip_equal(type.getShape(), sizes))
    if (ShapedType::isDynamic(size))
      dynamic.push_back(value);
  return memref::AllocOp::create(b, loc, type, dynamic);
}

} // namespace mlir::vmoe

#endif // LIB_CONVERSION_VMOETOGPU_PATTERNS_H
