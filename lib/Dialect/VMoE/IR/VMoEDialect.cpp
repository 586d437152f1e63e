//===- VMoEDialect.cpp - vmoe dialect registration --------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Registers the vmoe operations and attributes, and defines the generated
// enum and attribute code.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/IR/VMoE.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::vmoe;

#include "vmoe/Dialect/VMoE/IR/VMoEOpsDialect.cpp.inc"

#include "vmoe/Dialect/VMoE/IR/VMoEEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "vmoe/Dialect/VMoE/IR/VMoEAttrs.cpp.inc"

void VMoEDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "vmoe/Dialect/VMoE/IR/VMoEAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "vmoe/Dialect/VMoE/IR/VMoEOps.cpp.inc"
      >();
}

/// Folders produce index attributes (vmoe.capacity); they become
/// arith.constant ops.
Operation *VMoEDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  if (!arith::ConstantOp::isBuildableWith(value, type))
    return nullptr;
  return arith::ConstantOp::create(builder, loc, type,
                                   cast<TypedAttr>(value));
}
