//===- AttentionBuilder.h - Attention as linalg.generic ops -----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Multi-head attention over [N, T, heads, dh] views as tensor-level
// linalg.generic contractions and a softmax: the model front end builds it
// where vmoe.attention is not used, and convert-vmoe-to-scf lowers
// vmoe.attention without bf16 products to it.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_UTILS_ATTENTIONBUILDER_H
#define VMOE_UTILS_ATTENTIONBUILDER_H

#include "mlir/IR/Builders.h"

namespace mlir::vmoe {

/// The body of a contraction generic (two inputs, one init).
using ContractionBodyFn = function_ref<void(OpBuilder &, Location, ValueRange)>;

/// softmax(s / sqrt(dh)) over the last dim of scores s [..., T]: the
/// division, then buildSoftmaxLastDim with reassociable max and sum.
Value buildAttentionWeights(OpBuilder &b, Location loc, Value scores,
                            int64_t dh);

/// context [N, Tq, heads, dh] of q [N, Tq, heads, dh], k and v
/// [N, T, heads, dh] (static shapes): scores = q kᵀ, probabilities, then
/// probabilities times v, both products with the body `product`. With
/// `copyKTransposed` k is first copied to kT [N, heads, dh, T] (the reads
/// of k contiguous, the writes strided), so that the B operand of q kᵀ is
/// contiguous along its output columns; otherwise q kᵀ reads k's rows.
Value buildAttentionGenerics(OpBuilder &b, Location loc, Value q, Value k,
                             Value v, ContractionBodyFn product,
                             bool copyKTransposed);

} // namespace mlir::vmoe

#endif // VMOE_UTILS_ATTENTIONBUILDER_H
