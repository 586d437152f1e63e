//===- MemRefShapes.cpp - Shape queries of the codegen ----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Codegen/MemRefShapes.h"

using namespace mlir;

bool mlir::vmoe::hasUnitInnerStride(MemRefType type) {
  if (type.getRank() == 0)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(type.getStridesAndOffset(strides, offset)) &&
         strides.back() == 1;
}

int64_t mlir::vmoe::staticProduct(ArrayRef<int64_t> sizes) {
  int64_t product = 1;
  for (int64_t size : sizes) {
    if (ShapedType::isDynamic(size))
      return ShapedType::kDynamic;
    product *= size;
  }
  return product;
}
