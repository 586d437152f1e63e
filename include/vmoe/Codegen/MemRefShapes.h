//===- MemRefShapes.h - Shape queries of the CPU and GPU codegen -*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Small static-shape queries the kernel generators share.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_CODEGEN_MEMREFSHAPES_H
#define VMOE_CODEGEN_MEMREFSHAPES_H

#include "mlir/IR/BuiltinTypes.h"

namespace mlir::vmoe {

/// True when the innermost dim of `type` has unit stride (its rows are
/// contiguous: vector loads and stores along them are plain).
bool hasUnitInnerStride(MemRefType type);

/// The product of `sizes`, or ShapedType::kDynamic when one is dynamic.
int64_t staticProduct(ArrayRef<int64_t> sizes);

} // namespace mlir::vmoe

#endif // VMOE_CODEGEN_MEMREFSHAPES_H
