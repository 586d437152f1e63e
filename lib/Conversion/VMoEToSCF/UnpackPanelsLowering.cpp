//===- UnpackPanelsLowering.cpp - Lower unpack_panels -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe.unpack_panels -> a copying linalg.generic over the plain result:
// result[..., k, n] = panels[..., n floordiv L, k, n mod L]. Only weights
// that no fused_experts reads in place get here (vmoe-fuse-experts hands
// the panels to the fused op directly). bf16 pair panels (storage
// bf16_pairs) read word [..., n floordiv L, k floordiv 2, n mod L] and
// widen its low (k even) or high (k odd) half to f32.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "Patterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::lowering;

namespace {

struct UnpackPanelsOpLowering : OpConversionPattern<UnpackPanelsOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(UnpackPanelsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto panelsType = op.getPanels().getType();
    auto resultType = op.getResult().getType();
    int64_t width = panelsType.getShape().back();
    if (ShapedType::isDynamic(width))
      return rewriter.notifyMatchFailure(op, "dynamic panel width");
    unsigned rank = resultType.getRank();
    MLIRContext *ctx = rewriter.getContext();
    // Result dims: (lead..., k, n); panels dims: (lead..., n / L, k, n % L).
    SmallVector<AffineExpr> in;
    for (unsigned i = 0; i + 2 < rank; ++i)
      in.push_back(getAffineDimExpr(i, ctx));
    AffineExpr k = getAffineDimExpr(rank - 2, ctx);
    AffineExpr n = getAffineDimExpr(rank - 1, ctx);
    bool bf16Pairs = op.getStorage() == PanelStorage::bf16_pairs;
    in.push_back(n.floorDiv(width));
    in.push_back(bf16Pairs ? k.floorDiv(2) : k);
    in.push_back(n % width);
    SmallVector<AffineMap> maps = {AffineMap::get(rank, 0, in, ctx),
                                   rewriter.getMultiDimIdentityMap(rank)};
    SmallVector<OpFoldResult> sizes;
    for (unsigned i = 0; i + 2 < rank; ++i)
      sizes.push_back(tensor::getMixedSize(rewriter, loc, adaptor.getPanels(),
                                           i));
    // K: the panels' (f32), or the result's (bf16 pairs hold ceil(K/2)).
    if (!bf16Pairs)
      sizes.push_back(
          tensor::getMixedSize(rewriter, loc, adaptor.getPanels(), rank - 1));
    else if (resultType.isDynamicDim(rank - 2))
      return rewriter.notifyMatchFailure(op, "dynamic K of bf16 pairs");
    else
      sizes.push_back(rewriter.getIndexAttr(resultType.getDimSize(rank - 2)));
    if (resultType.isDynamicDim(rank - 1))
      return rewriter.notifyMatchFailure(op, "dynamic result width");
    sizes.push_back(rewriter.getIndexAttr(resultType.getDimSize(rank - 1)));
    Value init = tensor::EmptyOp::create(rewriter, loc, sizes,
                                         resultType.getElementType());
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    auto copy = linalg::GenericOp::create(
        rewriter, loc, resultType, ValueRange{adaptor.getPanels()},
        ValueRange{init}, maps, iterators,
        [&](OpBuilder &b, Location loc, ValueRange args) {
          if (!bf16Pairs) {
            linalg::YieldOp::create(b, loc, args[0]);
            return;
          }
          Type i32 = b.getI32Type();
          Value word = arith::BitcastOp::create(b, loc, i32, args[0]);
          Value kIndex = linalg::IndexOp::create(b, loc, rank - 2);
          Value odd = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::ne,
              arith::RemUIOp::create(b, loc, kIndex, indexConst(b, loc, 2)),
              indexConst(b, loc, 0));
          Value high = arith::AndIOp::create(
              b, loc, word,
              arith::ConstantIntOp::create(b, loc, i32,
                                           static_cast<int32_t>(0xFFFF0000)));
          Value low = arith::ShLIOp::create(
              b, loc, word, arith::ConstantIntOp::create(b, loc, i32, 16));
          Value bits = arith::SelectOp::create(b, loc, odd, high, low);
          Value value = arith::BitcastOp::create(b, loc, b.getF32Type(), bits);
          linalg::YieldOp::create(b, loc, value);
        });
    rewriter.replaceOp(op, copy.getResult(0));
    return success();
  }
};

} // namespace

void mlir::vmoe::lowering::populateUnpackPanelsLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<UnpackPanelsOpLowering>(patterns.getContext());
}
