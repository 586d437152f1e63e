//===- TensorBuilders.h - Tensor-level IR building blocks -------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Small builders of tensor-level linalg/arith/math IR shared by the vmoe
// lowerings and the model front end: constants, empty and filled tensors,
// reductions and softmax over the last dim, and the expert activations with
// the operation order of PyTorch's CPU kernels.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_UTILS_TENSORBUILDERS_H
#define VMOE_UTILS_TENSORBUILDERS_H

#include "vmoe/Dialect/VMoE/IR/VMoE.h"

#include "mlir/IR/Builders.h"

namespace mlir::vmoe {

/// A read-only buffer of a ranked tensor for hand-written loops: row-major
/// and contiguous, at any offset, so that a slice of a larger buffer (a
/// model's weights) is read in place instead of copied. A non-contiguous
/// source is copied by bufferization.
Value readOnlyBuffer(OpBuilder &b, Location loc, Value tensor);

/// An `index` constant.
Value indexConst(OpBuilder &b, Location loc, int64_t value);

/// An `i32` constant.
Value i32Const(OpBuilder &b, Location loc, int32_t value);

/// A float constant of type `type` (a splat for a vector type).
Value floatConst(OpBuilder &b, Location loc, Type type, double value);

/// Sizes of `tensor`: attributes for static dims, tensor.dim for dynamic ones.
SmallVector<OpFoldResult> mixedSizes(OpBuilder &b, Location loc, Value tensor);

/// tensor.empty of `sizes` x `elementType`.
Value emptyTensor(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                  Type elementType);

/// tensor.empty of `sizes` filled with the scalar `value`.
Value filledTensor(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                   Value value);

/// Unit strides of the given rank.
SmallVector<OpFoldResult> unitStrides(OpBuilder &b, int64_t rank);

/// Entry `index` of dim `dim` of a static-shaped tensor, with that dim
/// dropped: e.g. q, k or v (dim 2) of a [N, T, 3, heads, dh] tensor.
Value extractIndexOfDim(OpBuilder &b, Location loc, Value tensor, unsigned dim,
                        int64_t index);

/// The map (d0, ..., d[numDims-1]) -> (d[dims[0]], d[dims[1]], ...).
AffineMap projectionMap(MLIRContext *ctx, unsigned numDims,
                        ArrayRef<unsigned> dims);

/// Body of a contraction generic: yields acc + in0 * in1 (mul, then add).
void buildMultiplyAccumulateBody(OpBuilder &b, Location loc, ValueRange args);

/// Body of a sum generic (one input, one output): yields acc + in0.
void buildAccumulateBody(OpBuilder &b, Location loc, ValueRange args);

/// A scalar combiner of two values.
using ScalarFn = function_ref<Value(OpBuilder &, Location, Value, Value)>;

/// Reduces the last dim of `input` (any rank >= 1) with `combine(acc, v)`,
/// starting from `initial`.
Value reduceLastDim(OpBuilder &b, Location loc, Value input, double initial,
                    ScalarFn combine);

/// Maps every element `v` of `input` to `fn(v, perRow[...])`, where `perRow`
/// has the shape of `input` without its last dim.
Value mapWithRowValue(OpBuilder &b, Location loc, Value input, Value perRow,
                      ScalarFn fn);

/// softmax over the last dim: exp(v - max) / sum, in that order. With
/// `reassociate`, the row max and sum may be taken in any order
/// (fastmath `reassoc`: vector accumulators; the max is exact either way).
Value buildSoftmaxLastDim(OpBuilder &b, Location loc, Value input,
                          bool reassociate = false);

/// `lhs + rhs` that LLVM may reassociate with other such adds (fastmath
/// `reassoc`): a row sum of them vectorizes.
Value reassociableAdd(OpBuilder &b, Location loc, Value lhs, Value rhs);

/// The activation of vmoe.expert_ffn applied to `v` (f32 or a vector of
/// f32). With `roundedToBF16` (the result is rounded to bf16 before any
/// use: the hidden of a bf16 pair GEMM) gelu_tanh and silu are computed as
/// v * sigmoid(.) from 2^t built with integer ops, a few f32 ulps from the
/// tanh / exp forms and about twice as fast; otherwise through math.tanh,
/// math.erf and math.exp.
Value buildActivation(OpBuilder &b, Location loc, Activation activation,
                      Value v, bool roundedToBF16 = false);

/// The combine of the fused expert lowerings: out[g, t] (shape of `x`) is
/// the sum, over the choices i with slots[g, t, i] >= 0 and in choice
/// order, of planes[i, g, t] (`planes` is k x G x S x D).
Value buildChoiceSum(OpBuilder &b, Location loc, Value planes, Value slots,
                     Value x, int64_t k);

} // namespace mlir::vmoe

#endif // VMOE_UTILS_TENSORBUILDERS_H
