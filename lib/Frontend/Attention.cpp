//===- Attention.cpp - Multi-head self-attention ----------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The qkv projection, split into q, k and v as [N, T, heads, dh] views,
// attention, the output projection. With --precision=bf16 on the CPU the
// attention is vmoe.attention (one fused loop over images x heads, both
// products on bf16 pairs); otherwise linalg.generic contractions over the
// views and a softmax (vmoe/Utils/AttentionBuilder.h), batched over images
// x heads on the GEMM microkernel (vmoe-vectorize-contractions).
//
//===----------------------------------------------------------------------===//

#include "ForwardBuilder.h"

#include "vmoe/Codegen/BF16PairContraction.h"
#include "vmoe/Utils/AttentionBuilder.h"
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
  // With --precision=bf16 (and --bf16-attention) both products multiply
  // operands rounded to bf16 (exact products, f32 sums: the pair
  // microkernel); softmax stays f32. On the CPU that form is
  // vmoe.attention, which convert-vmoe-to-scf lowers to one fused loop
  // over images x heads, and q, k and v reach it as bf16 where the target
  // rounds in one instruction (the projection's epilogue rounds them: half
  // the bytes, and the attention reads pairs instead of rounding);
  // elsewhere (f32 products, the GPU) the
  // contractions and the softmax are linalg.generic ops, with k copied to
  // kT first (AttentionBuilder.h).
  bool bf16Products = options.precision == "bf16" && options.bf16Attention;
  bool fused = bf16Products && options.target == "cpu";
  bool rounded = fused && options.bf16Activations;
  Type element = rounded ? Type(b.getBF16Type()) : Type(f32);
  Value q, k, v;
  if (!classQueriesOnly) {
    Value qkv = linear(x, prefix + ".qkv", std::nullopt, rounded);
    // [N*T, 3D] -> [N, T, 3, heads, dh]; q, k, v as [N, T, heads, dh].
    Value split = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({n, t, 3, heads, dh}, element), qkv,
        ArrayRef<ReassociationIndices>{{0, 1}, {2, 3, 4}});
    q = extractIndexOfDim(b, loc, split, 2, 0);
    k = extractIndexOfDim(b, loc, split, 2, 1);
    v = extractIndexOfDim(b, loc, split, 2, 2);
  } else {
    // The class tokens' queries alone ([N, D] -> [N, 1, heads, dh]: the
    // kernel's first D columns on their rows), keys and values of every
    // token (the other 2 D columns, [N*T, 2D] -> [N, T, 2, heads, dh]).
    Value classQ = linear(classTokens(x), prefix + ".qkv",
                          std::make_pair(int64_t(0), d), rounded);
    q = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({n, 1, heads, dh}, element), classQ,
        ArrayRef<ReassociationIndices>{{0, 1}, {2, 3}});
    Value kv = linear(x, prefix + ".qkv", std::make_pair(d, 2 * d), rounded);
    Value split = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({n, t, 2, heads, dh}, element), kv,
        ArrayRef<ReassociationIndices>{{0, 1}, {2, 3, 4}});
    k = extractIndexOfDim(b, loc, split, 2, 0);
    v = extractIndexOfDim(b, loc, split, 2, 1);
  }
  Value context;
  if (fused) {
    auto resultType = RankedTensorType::get(
        cast<RankedTensorType>(q.getType()).getShape(), f32);
    context = AttentionOp::create(b, loc, resultType, q, k, v,
                                  /*bf16_products=*/b.getUnitAttr());
  } else {
    context =
        buildAttentionGenerics(b, loc, q, k, v,
                               bf16Products ? buildBF16RoundedContractionBody
                                            : buildMultiplyAccumulateBody,
                               /*copyKTransposed=*/true);
  }
  Value merged = tensor::CollapseShapeOp::create(
      b, loc, context, ArrayRef<ReassociationIndices>{{0, 1}, {2, 3}});
  return linear(merged, prefix + ".out");
}
