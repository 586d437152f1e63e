//===- LoweringUtils.h - Builders shared by the vmoe lowerings --*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Loop and slice builders used by the lowering patterns of
// convert-vmoe-to-scf: rows of tensors, scf.forall with parallel inserts,
// scf.for with carried values, and the top-k selection loop that route and
// bpr_sort share. Internal to lib/Conversion/VMoEToSCF.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_CONVERSION_VMOETOSCF_LOWERINGUTILS_H
#define LIB_CONVERSION_VMOETOSCF_LOWERINGUTILS_H

#include "vmoe/Codegen/Microkernel.h"
#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::vmoe::lowering {

/// memref.load of an i32 as an index.
Value loadIndex(OpBuilder &b, Location loc, Value memref, ValueRange indices);

/// Extracts the 1-D row `source[prefix..., 0 : size]` (the last dim whole).
Value extractRow(OpBuilder &b, Location loc, Value source,
                 ArrayRef<OpFoldResult> prefix, OpFoldResult size);

/// Inserts the 1-D `row` at `dest[prefix..., 0 : size]`.
Value insertRow(OpBuilder &b, Location loc, Value row, Value dest,
                ArrayRef<OpFoldResult> prefix, OpFoldResult size);

/// The 1x1 slice of the rank-2 `dest` at `at`, holding `value`: what a
/// forall iteration inserts back when it writes one element.
Value insertScalar(OpBuilder &b, Location loc, Value value, Value dest,
                   ArrayRef<OpFoldResult> at);

/// A slice that one scf.forall iteration writes back in parallel.
struct ParallelInsert {
  Value source;
  unsigned sharedOutIndex;
  SmallVector<OpFoldResult> offsets;
  SmallVector<OpFoldResult> sizes;
};

/// Body of a forall: gets the induction variables and the shared outputs and
/// returns the slices to insert in parallel.
using ForallBodyFn = function_ref<SmallVector<ParallelInsert>(
    OpBuilder &, Location, ValueRange ivs, ValueRange sharedOuts)>;

/// scf.forall over [0, upperBounds) with `outputs` as shared outputs.
scf::ForallOp buildForall(OpBuilder &b, Location loc,
                          ArrayRef<OpFoldResult> upperBounds,
                          ValueRange outputs, ForallBodyFn body);

/// Body of one scf.for step over [0, ub): gets the induction variable and
/// the carried values, returns the values to yield.
using LoopBodyFn = function_ref<SmallVector<Value>(OpBuilder &, Location,
                                                   Value iv, ValueRange)>;

/// scf.for over [0, upperBound) step 1 carrying `init`; returns the results.
ValueRange buildLoop(OpBuilder &b, Location loc, Value upperBound,
                     ValueRange init, LoopBodyFn body);

/// The i64 order key of entry `e` (index, below 2^32) of f32 value `v`: a
/// larger key comes first in the order of top-k and BPR (larger value,
/// then lower index; -0 ties with +0; NaN below every number, NaNs tied).
/// The value's bits, mapped to a signed integer that orders like the
/// value, fill the high half; 2^32 - 1 - e the low half.
Value buildOrderKey(OpBuilder &b, Location loc, Value v, Value e);

/// Callback of buildTopK for choice `i` (an index), with the chosen `value`
/// and expert `index` (index type; -1 when no candidate is left, e.g. NaN
/// keys), and the carried values; returns the new carried values.
using TopKChoiceFn = function_ref<SmallVector<Value>(
    OpBuilder &, Location, Value i, Value value, Value index, ValueRange)>;

/// Selects the `k` largest entries of the row key[prefix..., 0 : n] in
/// descending order, ties to the lower index, NaN never chosen. Choice i is
/// the best entry strictly after choice i-1 in the order (value desc, index
/// asc), so no mask is needed: two passes over the row per choice, a
/// maximum and a first index, reductions that LLVM vectorizes (a running
/// best value and index does not). Returns the final carried values.
ValueRange buildTopK(OpBuilder &b, Location loc, Value key,
                     ValueRange prefix, Value n, Value k, ValueRange init,
                     TopKChoiceFn onChoice);

/// Dim `i` of the shaped `type`, or std::nullopt when dynamic.
std::optional<int64_t> staticDim(Type type, int64_t i);

/// Makes `access` keep C in the row-major buffer `c`: element (row, n) at
/// c[prefix..., row, n], zero-initialized, partial sums and final values
/// stored there. loadA and loadB are left to the caller.
void setPlainOutput(GemmAccessors &access, Value c, ValueRange prefix,
                    VectorType vectorType);

/// The weight buffers of expert MLPs: w1 [E, D, H], b1 [E, H],
/// w2 [E, H, D], b2 [E, D], and their activation. With `panelWidth` L,
/// w1 and w2 are in panel layout ([E, ceil(H/L), D, L], [E, ceil(D/L), H,
/// L]; PanelLayout.h) and the GEMMs read them in place.
struct ExpertMLPWeights {
  Value w1, b1, w2, b2;
  Activation activation;
  std::optional<int64_t> panelWidth = std::nullopt;
};

/// The panel width of an expert op's `weight_panels` attribute, checked
/// against the microkernel: failure (with a diagnostic on `op`) when the
/// vector lanes do not divide it.
FailureOr<std::optional<int64_t>>
expertPanelWidth(Operation *op, std::optional<uint64_t> weightPanels,
                 const MicrokernelShape &shape);

/// Reads A[row, k] of a GEMM, a scalar.
using RowLoadFn = std::function<Value(OpBuilder &, Location, Value, Value)>;
/// The indices of element (row, n) of a GEMM output.
using RowIndicesFn = std::function<SmallVector<Value>(OpBuilder &, Location,
                                                      Value, Value)>;

/// The MLP of expert `ex` on `rows` rows (at most `maxRows`) as two
/// microkernel GEMMs: hidden = act(A . w1[ex] + b1[ex]) in a [maxRows, H]
/// scratch, then out = hidden . w2[ex] + b2[ex] with output row `row` at
/// `outIndices(row, n)` of `out` (which also holds the partial sums). Row
/// `row` of A is read through `loadA`. `staticD`, `staticH`: the widths
/// when known. B is read from the weight panels in place, or packed block
/// by block into one allocaBlockScratch on the stack of the running thread
/// (no heap allocation per expert or call).
void emitExpertMLP(OpBuilder &b, Location loc, const MicrokernelShape &shape,
                   const ExpertMLPWeights &weights, Value ex, Value rows,
                   Value maxRows, Value d, Value h,
                   std::optional<int64_t> staticD,
                   std::optional<int64_t> staticH, RowLoadFn loadA, Value out,
                   RowIndicesFn outIndices);

/// logits[g, s, e] = sum_d x[g, s, d] * router[d, e] (vmoe.route's router
/// contraction, shared by every op that reads the router).
Value buildRouterLogits(OpBuilder &b, Location loc, Value x, Value router);

/// logits + noise * (noise_std / E), E = dim 1 of `router`: the noisy gating
/// of vmoe.route and vmoe.router_losses (SPEC §8).
Value addRouterNoise(OpBuilder &b, Location loc, Value logits, Value noise,
                     Value router, double noiseStd);

} // namespace mlir::vmoe::lowering

#endif // LIB_CONVERSION_VMOETOSCF_LOWERINGUTILS_H
