//===- ExpertLowering.cpp - Lower expert_ffn --------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe.expert_ffn becomes two batched contractions over the E x G x B x D
// buffers with the bias and the activation in between, each a
// linalg.generic whose innermost loop runs over the contiguous output dim.
// When the second kernel is stored as bf16 pairs and the target rounds
// to bf16 in one instruction (bf16-dot), the hidden is a bf16 tensor: the
// bias and activation round it, the second contraction widens it (the
// same values as rounding an f32 hidden's rows in the GEMM).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "Patterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"


using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::lowering;

using utils::IteratorType;

/// out[e, g, b, n] = sum_k in[e, g, b, k] * w[e, k, n]: loops (e, g, b, k, n)
/// so that the innermost loop walks rows of w and of the output. A bf16
/// `in` (a hidden rounded by its producer) is widened to f32 in the body.
static Value buildExpertMatmul(OpBuilder &b, Location loc, Value in, Value w) {
  auto wType = cast<RankedTensorType>(w.getType());
  SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, in);
  sizes[3] = mixedSizes(b, loc, w)[2];
  Value init = filledTensor(b, loc, sizes,
                            floatConst(b, loc, wType.getElementType(), 0));
  bool widen = cast<RankedTensorType>(in.getType()).getElementType().isBF16();
  MLIRContext *ctx = b.getContext();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  SmallVector<AffineMap> maps = {
      AffineMap::get(5, 0, {d(0), d(1), d(2), d(3)}, ctx),
      AffineMap::get(5, 0, {d(0), d(3), d(4)}, ctx),
      AffineMap::get(5, 0, {d(0), d(1), d(2), d(4)}, ctx)};
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{in, w}, ValueRange{init}, maps,
             {IteratorType::parallel, IteratorType::parallel,
              IteratorType::parallel, IteratorType::reduction,
              IteratorType::parallel},
             [&](OpBuilder &b, Location loc, ValueRange args) {
               if (!widen)
                 return buildMultiplyAccumulateBody(b, loc, args);
               Value a = arith::ExtFOp::create(b, loc, b.getF32Type(), args[0],
                                               arith::FastMathFlagsAttr());
               buildMultiplyAccumulateBody(b, loc, {a, args[1], args[2]});
             })
      .getResult(0);
}

/// Whether `kernel` is read from bf16 pair panels: a GEMM with it as B
/// rounds its A operand to bf16.
static bool isBF16PairKernel(Value kernel) {
  auto unpack = kernel.getDefiningOp<UnpackPanelsOp>();
  return unpack && unpack.getStorage() == PanelStorage::bf16_pairs;
}

/// in[e, g, b, n] + bias[e, n], then `activation` when given, in place;
/// `roundedToBF16`: the result only feeds a bf16 pair GEMM, which reads it
/// rounded to bf16; `storeBF16`: it is then stored as a new bf16 tensor
/// (half the bytes, and the GEMM reads its pairs of k as they are instead
/// of rounding its rows).
static Value buildBiasActivation(OpBuilder &b, Location loc, Value in,
                                 Value bias,
                                 std::optional<Activation> activation,
                                 bool roundedToBF16 = false,
                                 bool storeBF16 = false) {
  MLIRContext *ctx = b.getContext();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  AffineMap id = b.getMultiDimIdentityMap(4);
  AffineMap biasMap = AffineMap::get(4, 0, {d(0), d(3)}, ctx);
  auto body = [&](OpBuilder &b, Location loc, Value acc, Value biasValue) {
    Value v = arith::AddFOp::create(b, loc, acc, biasValue);
    if (activation)
      v = buildActivation(b, loc, *activation, v, roundedToBF16);
    return v;
  };
  if (storeBF16) {
    Value init = emptyTensor(b, loc, mixedSizes(b, loc, in), b.getBF16Type());
    return linalg::GenericOp::create(
               b, loc, init.getType(), ValueRange{in, bias}, ValueRange{init},
               {id, biasMap, id},
               SmallVector<IteratorType>(4, IteratorType::parallel),
               [&](OpBuilder &b, Location loc, ValueRange args) {
                 Value v = body(b, loc, args[0], args[1]);
                 linalg::YieldOp::create(b, loc,
                                         ValueRange{arith::TruncFOp::create(
                                             b, loc, b.getBF16Type(), v)});
               })
        .getResult(0);
  }
  return linalg::GenericOp::create(
             b, loc, in.getType(), ValueRange{bias}, ValueRange{in},
             {biasMap, id},
             SmallVector<IteratorType>(4, IteratorType::parallel),
             [&](OpBuilder &b, Location loc, ValueRange args) {
               linalg::YieldOp::create(
                   b, loc, ValueRange{body(b, loc, args[1], args[0])});
             })
      .getResult(0);
}

namespace {

/// vmoe.expert_ffn -> matmul, bias + activation, matmul, bias.
struct ExpertFFNOpLowering : OpConversionPattern<ExpertFFNOp> {
  ExpertFFNOpLowering(MLIRContext *context, bool bf16Hidden)
      : OpConversionPattern(context), bf16Hidden(bf16Hidden) {}
  bool bf16Hidden;

  LogicalResult
  matchAndRewrite(ExpertFFNOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value hidden =
        buildExpertMatmul(rewriter, loc, adaptor.getBuffers(), adaptor.getW1());
    bool pairs = isBF16PairKernel(op.getW2());
    hidden =
        buildBiasActivation(rewriter, loc, hidden, adaptor.getB1(),
                            op.getActivation(), pairs, pairs && bf16Hidden);
    Value out = buildExpertMatmul(rewriter, loc, hidden, adaptor.getW2());
    out = buildBiasActivation(rewriter, loc, out, adaptor.getB2(),
                              std::nullopt);
    rewriter.replaceOp(op, out);
    return success();
  }
};

/// vmoe.expert_swiglu -> two matmuls, silu(gate) * up, matmul.
struct ExpertSwiGLUOpLowering : OpConversionPattern<ExpertSwiGLUOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(ExpertSwiGLUOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value gate = buildExpertMatmul(b, loc, adaptor.getBuffers(),
                                   adaptor.getWGate());
    Value up =
        buildExpertMatmul(b, loc, adaptor.getBuffers(), adaptor.getWUp());
    bool roundedToBF16 = isBF16PairKernel(op.getWDown());
    AffineMap id = b.getMultiDimIdentityMap(4);
    Value hidden =
        linalg::GenericOp::create(
            b, loc, up.getType(), ValueRange{gate}, ValueRange{up}, {id, id},
            SmallVector<IteratorType>(4, IteratorType::parallel),
            [&](OpBuilder &b, Location loc, ValueRange args) {
              Value act = buildActivation(b, loc, Activation::silu, args[0],
                                          roundedToBF16);
              linalg::YieldOp::create(
                  b, loc,
                  ValueRange{arith::MulFOp::create(b, loc, act, args[1])});
            })
            .getResult(0);
    rewriter.replaceOp(op,
                       buildExpertMatmul(b, loc, hidden, adaptor.getWDown()));
    return success();
  }
};

} // namespace

void mlir::vmoe::lowering::populateExpertLoweringPatterns(
    RewritePatternSet &patterns, bool bf16Hidden) {
  patterns.add<ExpertFFNOpLowering>(patterns.getContext(), bf16Hidden);
  patterns.add<ExpertSwiGLUOpLowering>(patterns.getContext());
}
