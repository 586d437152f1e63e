//===- SizeLimits.cpp - Size limits of every vmoe op ------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe-C1 and vmoe-C2, the size limits of SPEC §11 that the `SizeLimits`
// trait checks on every vmoe op (SizeLimits.h).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/IR/SizeLimits.h"

#include "vmoe/Support/Limits.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;

/// vmoe-C1 for one operand or result type: each static dimension in
/// [1, limits::kMaxDimension] and at most limits::kMaxTensorElements
/// elements. Zero sizes (G, S, D, H or E = 0) have no meaning for a MoE
/// layer and the lowerings assume them away; sizes near 2^62 would overflow
/// the index arithmetic of the lowerings.
static LogicalResult verifyTypeLimits(Operation *op, Type type, StringRef kind,
                                      unsigned index) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasRank())
    return success();
  int64_t elements = 1;
  for (auto [dimIndex, dim] : llvm::enumerate(shaped.getShape())) {
    if (ShapedType::isDynamic(dim))
      continue;
    if (dim < 1 || dim > ::vmoe::limits::kMaxDimension)
      return op->emitOpError()
             << kind << " #" << index << " dim " << dimIndex
             << " must be in [1, " << ::vmoe::limits::kMaxDimension
             << "], got " << dim << " in " << type;
    std::optional<int64_t> product = llvm::checkedMul(elements, dim);
    if (!product || *product > ::vmoe::limits::kMaxTensorElements)
      return op->emitOpError()
             << kind << " #" << index << " has more than "
             << ::vmoe::limits::kMaxTensorElements << " elements: " << type;
    elements = *product;
  }
  return success();
}

/// vmoe-C2: every 64-bit integer attribute of the op (sizes and counts: k,
/// capacity, num_experts, multiple_of, ranks, ...) is at most
/// limits::kMaxDimension. Lower bounds are per attribute (ODS constraints
/// and the op's verifier).
static LogicalResult verifyAttributeLimits(Operation *op) {
  std::optional<RegisteredOperationName> name = op->getRegisteredInfo();
  if (!name)
    return success();
  for (StringAttr attrName : name->getAttributeNames()) {
    std::optional<Attribute> attr = op->getInherentAttr(attrName);
    auto integer = dyn_cast_if_present<IntegerAttr>(attr.value_or(nullptr));
    if (!integer || !integer.getType().isSignlessInteger(64))
      continue;
    int64_t value = integer.getInt();
    if (value > ::vmoe::limits::kMaxDimension)
      return op->emitOpError()
             << "attribute '" << attrName.getValue() << "' must be <= "
             << ::vmoe::limits::kMaxDimension << " (the limit), got "
             << value;
  }
  return success();
}

LogicalResult mlir::vmoe::verifySizeLimits(Operation *op) {
  for (auto [index, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(verifyTypeLimits(op, type, "operand", index)))
      return failure();
  for (auto [index, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(verifyTypeLimits(op, type, "result", index)))
      return failure();
  return verifyAttributeLimits(op);
}
