//===- SizeLimits.h - Size limits of every vmoe op --------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// SPEC §11 in the dialect (docs/Limits.md, docs/Dialect.md vmoe-C1 and
// vmoe-C2): every static dimension of a vmoe op's operands and results is in
// [1, limits::kMaxDimension], every tensor has at most
// limits::kMaxTensorElements elements, and every integer attribute (k,
// capacity, ranks, ...) is at most limits::kMaxDimension. The op trait
// `SizeLimits` is part of the base class of all vmoe ops (VMoEDialect.td),
// so every op checks them, before its own verifier.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_DIALECT_VMOE_IR_SIZELIMITS_H
#define VMOE_DIALECT_VMOE_IR_SIZELIMITS_H

#include "mlir/IR/OpDefinition.h"

namespace mlir::vmoe {

/// vmoe-C1 (tensor sizes) and vmoe-C2 (integer attributes) for `op`; emits
/// one diagnostic naming the operand, result or attribute.
LogicalResult verifySizeLimits(Operation *op);

namespace OpTrait {

/// The size limits as an op trait (ODS: VMoE_SizeLimits).
template <typename ConcreteType>
class SizeLimits : public ::mlir::OpTrait::TraitBase<ConcreteType, SizeLimits> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return verifySizeLimits(op);
  }
};

} // namespace OpTrait
} // namespace mlir::vmoe

#endif // VMOE_DIALECT_VMOE_IR_SIZELIMITS_H
