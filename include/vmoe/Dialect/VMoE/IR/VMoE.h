//===- VMoE.h - vmoe dialect ------------------------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The vmoe dialect: generated declarations of the dialect, its enums,
// attributes and operations, in dependency order.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_DIALECT_VMOE_IR_VMOE_H
#define VMOE_DIALECT_VMOE_IR_VMOE_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "vmoe/Dialect/VMoE/IR/SizeLimits.h"

#include "vmoe/Dialect/VMoE/IR/VMoEOpsDialect.h.inc"

#include "vmoe/Dialect/VMoE/IR/VMoEEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "vmoe/Dialect/VMoE/IR/VMoEAttrs.h.inc"

#define GET_OP_CLASSES
#include "vmoe/Dialect/VMoE/IR/VMoEOps.h.inc"

namespace mlir::vmoe {

/// The discardable unit attribute on the linalg contraction that computes
/// router logits (convert-vmoe-to-scf): routing decisions (top-k, the BPR
/// order, capacity drops) depend on their exact values, so the GPU path
/// keeps them on FP32 products whatever GEMM instructions it uses for the
/// rest (vmoe-gpu-contractions).
inline constexpr llvm::StringLiteral kRouterLogitsAttrName =
    "vmoe.router_logits";

/// The discardable unit attribute on a row-wise linalg.generic (a norm's
/// normalize step) whose output vmoe-streaming-stores may write with
/// non-temporal stores, at the runtime's choice.
inline constexpr llvm::StringLiteral kStreamingStoresAttrName =
    "vmoe.streaming_stores";

/// The external i32 global, defined by the vmoe runtime, that turns those
/// stores on (non-zero).
inline constexpr llvm::StringLiteral kStreamingStoresFlagName =
    "vmoe_streaming_stores";

} // namespace mlir::vmoe

#endif // VMOE_DIALECT_VMOE_IR_VMOE_H
