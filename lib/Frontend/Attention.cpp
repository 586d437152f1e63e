//===- Attention.cpp - Multi-head self-attention ----------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Attention keeps heads as a tensor dim instead of transposing q and v:
// q kᵀ and the product with v are contractions over [N, T, heads, dh] views
// of the qkv projection. In f32 k alone is copied to kᵀ [N, heads, dh, T]
// (T·D floats per image), so that both products have their B operand
// contiguous along the output columns and run on the GEMM microkernel,
// batched over images x heads (vmoe-vectorize-contractions). With
// --precision=bf16 both products multiply operands rounded to bf16
// (buildBF16RoundedContractionBody; --bf16-attention=false keeps them f32)
// and, on the CPU, q kᵀ reads k itself: its pairs are packed from k's rows
// per call.
//
//===----------------------------------------------------------------------===//

#include "ForwardBuilder.h"

#include "vmoe/Codegen/BF16PairContraction.h"
#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::frontend;

using utils::IteratorType;

/// Multi-head self-attention of x [N*T, D]; with `classQueriesOnly` the
/// queries are the class tokens only (tq = 1 per image): [N, D].
Value ForwardBuilder::attention(Value x, const std::string &prefix,
                                bool classQueriesOnly) {
  int64_t n = batchImages(model, options), t = model.tokensPerImage();
  int64_t d = model.modelWidth, heads = model.heads, dh = d / heads;
  int64_t tq = classQueriesOnly ? 1 : t;
  Value q, k, v;
  if (!classQueriesOnly) {
    Value qkv = linear(x, prefix + ".qkv");
    // [N*T, 3D] -> [N, T, 3, heads, dh]; q, k, v as [N, T, heads, dh].
    Value split = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({n, t, 3, heads, dh}, f32), qkv,
        ArrayRef<ReassociationIndices>{{0, 1}, {2, 3, 4}});
    q = extractIndexOfDim(b, loc, split, 2, 0);
    k = extractIndexOfDim(b, loc, split, 2, 1);
    v = extractIndexOfDim(b, loc, split, 2, 2);
  } else {
    // The class tokens' queries alone ([N, D] -> [N, 1, heads, dh]: the
    // kernel's first D columns on their rows), keys and values of every
    // token (the other 2 D columns, [N*T, 2D] -> [N, T, 2, heads, dh]).
    Value classQ =
        linear(classTokens(x), prefix + ".qkv", std::make_pair(int64_t(0), d));
    q = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({n, 1, heads, dh}, f32), classQ,
        ArrayRef<ReassociationIndices>{{0, 1}, {2, 3}});
    Value kv = linear(x, prefix + ".qkv", std::make_pair(d, 2 * d));
    Value split = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({n, t, 2, heads, dh}, f32), kv,
        ArrayRef<ReassociationIndices>{{0, 1}, {2, 3, 4}});
    k = extractIndexOfDim(b, loc, split, 2, 0);
    v = extractIndexOfDim(b, loc, split, 2, 1);
  }
  MLIRContext *ctx = b.getContext();
  // With --precision=bf16 (and --bf16-attention) both products multiply
  // operands rounded to bf16 (exact products, f32 sums: the pair
  // microkernel); softmax stays f32.
  auto productBody = options.precision == "bf16" && options.bf16Attention
                         ? buildBF16RoundedContractionBody
                         : buildMultiplyAccumulateBody;
  // The B operand of q kᵀ. With bf16 products on the CPU it is k itself
  // (map (n, h, i, j, c) -> k[n, j, h, c]): vmoe-vectorize-contractions
  // packs kᵀ's bf16 pairs straight from k's rows, which are contiguous
  // along c. Otherwise kT[n, h, c, j] = k[n, j, h, c] is copied first, over
  // loops (n, j, h, c): the reads of k are contiguous and the writes
  // strided (vmoe-vectorize-transposes). (With j innermost the CPU code
  // gathered k with a stride of 3 D floats: 45 cycles per element on Zen
  // 4, 2% of V-MoE-S/32 bf16.)
  bool packFromK =
      productBody == buildBF16RoundedContractionBody && options.target == "cpu";
  Value kOperand = k;
  AffineMap kMap = projectionMap(ctx, 5, {0, 3, 1, 4});
  if (!packFromK) {
    Value kTInit = emptyTensor(b, loc,
                               {b.getIndexAttr(n), b.getIndexAttr(heads),
                                b.getIndexAttr(dh), b.getIndexAttr(t)},
                               f32);
    kOperand =
        linalg::GenericOp::create(
            b, loc, kTInit.getType(), ValueRange{k}, ValueRange{kTInit},
            {b.getMultiDimIdentityMap(4), projectionMap(ctx, 4, {0, 2, 3, 1})},
            SmallVector<IteratorType>(4, IteratorType::parallel),
            [](OpBuilder &b, Location loc, ValueRange args) {
              linalg::YieldOp::create(b, loc, args[0]);
            })
            .getResult(0);
    kMap = projectionMap(ctx, 5, {0, 1, 4, 3});
  }
  // scores[n, h, i, j] = sum_c q[n, i, h, c] kT[n, h, c, j] / sqrt(dh).
  Value scoresInit = filledTensor(b, loc,
                                  {b.getIndexAttr(n), b.getIndexAttr(heads),
                                   b.getIndexAttr(tq), b.getIndexAttr(t)},
                                  floatConst(b, loc, f32, 0));
  Value scores =
      linalg::GenericOp::create(b, loc, scoresInit.getType(),
                                ValueRange{q, kOperand}, ValueRange{scoresInit},
                                {projectionMap(ctx, 5, {0, 2, 1, 4}), kMap,
                                 projectionMap(ctx, 5, {0, 1, 2, 3})},
                                {IteratorType::parallel, IteratorType::parallel,
                                 IteratorType::parallel, IteratorType::parallel,
                                 IteratorType::reduction},
                                productBody)
          .getResult(0);
  Value probs = attentionWeights(scores, dh);
  // context[n, i, h, c] = sum_j probs[n, h, i, j] v[n, j, h, c]; loops
  // (n, h, i, j, c) keep the contiguous c innermost.
  Value contextInit = filledTensor(b, loc,
                                   {b.getIndexAttr(n), b.getIndexAttr(tq),
                                    b.getIndexAttr(heads), b.getIndexAttr(dh)},
                                   floatConst(b, loc, f32, 0));
  Value context = linalg::GenericOp::create(
                      b, loc, contextInit.getType(), ValueRange{probs, v},
                      ValueRange{contextInit},
                      {projectionMap(ctx, 5, {0, 1, 2, 3}),
                       projectionMap(ctx, 5, {0, 3, 1, 4}),
                       projectionMap(ctx, 5, {0, 2, 1, 4})},
                      {IteratorType::parallel, IteratorType::parallel,
                       IteratorType::parallel, IteratorType::reduction,
                       IteratorType::parallel},
                      productBody)
                      .getResult(0);
  Value merged = tensor::CollapseShapeOp::create(
      b, loc, context, ArrayRef<ReassociationIndices>{{0, 1}, {2, 3}});
  return linear(merged, prefix + ".out");
}
