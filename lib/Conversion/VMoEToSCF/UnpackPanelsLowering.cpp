//===- UnpackPanelsLowering.cpp - Lower unpack_panels -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// What becomes of vmoe.unpack_panels. A linalg contraction that reads the
// unpacked weights as its B operand (the operand holding the output's
// contiguous column dim n and the reduction k, `(..., k, n)`) reads the
// panels instead, through the map `(..., n floordiv L, k, n mod L)`, which
// vmoe-vectorize-contractions streams in place: constant weights stored
// packed at load are never repacked per call (dense layers, dense MLPs via
// expert_ffn, attention projections, patch embedding, head). Everything
// else, and widths the vector lanes do not divide, gets a copying
// linalg.generic over the plain result:
// result[..., k, n] = panels[..., n floordiv L, k, n mod L]. Expert weights
// of fused_experts never get here (vmoe-fuse-experts hands the panels to
// the fused op directly). bf16 pair panels (storage bf16_pairs,
// `--precision=bf16`) are folded into plain multiply-add contractions the
// same way, through `(..., n floordiv L, k floordiv 2, n mod L)`, and the
// contraction's body becomes the bf16 pair product that the microkernel
// computes (A rounded to bf16, the weight the low or high half of its word:
// vmoe/Codegen/BF16PairContraction.h); their copy elsewhere reads word
// [..., n floordiv L, k floordiv 2, n mod L] and widens its low (k even) or
// high (k odd) half to f32.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "Patterns.h"

#include "vmoe/Codegen/BF16PairContraction.h"
#include "vmoe/Codegen/PanelLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::lowering;

/// The reduction dim of the contraction that `use`, an operand of a
/// linalg.generic, is the B operand of, when it can read it from panels of
/// `width` floats: a (k, n) matrix operand with n the contiguous column dim
/// of the output.
static std::optional<unsigned> panelBReductionDim(OpOperand &use,
                                                  int64_t width,
                                                  int64_t lanes) {
  auto op = dyn_cast<linalg::GenericOp>(use.getOwner());
  if (!op || width % lanes != 0 || !op.hasPureTensorSemantics() ||
      op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !op.isDpsInput(&use) || !linalg::isaContractionOpInterface(op))
    return std::nullopt;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->n.size() != 1 || dims->k.size() != 1)
    return std::nullopt;
  auto dimAt = [](AffineMap map, unsigned fromBack) {
    return cast<AffineDimExpr>(
               map.getResult(map.getNumResults() - 1 - fromBack))
        .getPosition();
  };
  AffineMap map = op.getMatchingIndexingMap(&use);
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  unsigned n = dims->n.front(), k = dims->k.front();
  if (map.getNumResults() < 2 || dimAt(map, 0) != n || dimAt(map, 1) != k ||
      dimAt(out, 0) != n)
    return std::nullopt;
  return k;
}

/// Whether the body of `op` is `acc + x * y` of its two inputs and init,
/// all f32, where x may also be extf of a bf16 input (a hidden stored as
/// bf16): what a bf16 pair contraction may replace, `use` (f32) being B.
static bool isF32MulAddBody(linalg::GenericOp op, OpOperand &use) {
  Block &body = *op.getBlock();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (body.getNumArguments() != 3 || yield.getNumOperands() != 1 ||
      !body.getArgument(2).getType().isF32() ||
      !body.getArgument(use.getOperandNumber()).getType().isF32())
    return false;
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value acc = body.getArgument(2);
  Value product = add.getLhs() == acc   ? add.getRhs()
                  : add.getRhs() == acc ? add.getLhs()
                                        : Value();
  auto mul = product ? product.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul)
    return false;
  Value y = body.getArgument(use.getOperandNumber());
  Value a = body.getArgument(1 - use.getOperandNumber());
  // A: the f32 argument, or the f32 of a bf16 one.
  auto isA = [&](Value v) {
    if (a.getType().isF32())
      return v == a;
    auto ext = v.getDefiningOp<arith::ExtFOp>();
    return a.getType().isBF16() && ext && ext.getIn() == a &&
           ext->getBlock() == &body && ext.getType().isF32();
  };
  return (isA(mul.getLhs()) && mul.getRhs() == y) ||
         (mul.getLhs() == y && isA(mul.getRhs()));
}

/// Reads the B operand `use` of contraction `op` from the bf16 pair panels
/// `panels` of width `width`: a new linalg.generic whose B is the panels
/// through the pair panel map and whose body is the bf16 pair product.
static void foldPairPanels(IRRewriter &rewriter, linalg::GenericOp op,
                           OpOperand &use, Value panels, int64_t width,
                           unsigned kDim) {
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  unsigned b = use.getOperandNumber(), a = 1 - b;
  maps[b] = getPairPanelOperandMap(maps[b], width);
  SmallVector<Value> inputs = op.getDpsInputs();
  inputs[b] = panels;
  rewriter.setInsertionPoint(op);
  auto folded = linalg::GenericOp::create(
      rewriter, op.getLoc(), op.getResultTypes(), inputs, op.getDpsInits(),
      maps, op.getIteratorTypesArray(),
      [&](OpBuilder &builder, Location loc, ValueRange args) {
        buildBF16PairContractionBody(builder, loc, args[a], args[b], args[2],
                                     kDim);
      });
  rewriter.replaceOp(op, folded.getResults());
}

void mlir::vmoe::lowering::foldUnpackPanelsIntoContractions(Operation *root,
                                                            int64_t lanes) {
  SmallVector<UnpackPanelsOp> unpacks;
  root->walk([&](UnpackPanelsOp op) { unpacks.push_back(op); });
  IRRewriter rewriter(root->getContext());
  for (UnpackPanelsOp unpack : unpacks) {
    int64_t width = unpack.getPanels().getType().getShape().back();
    if (ShapedType::isDynamic(width))
      continue;
    bool pairs = unpack.getStorage() == PanelStorage::bf16_pairs;
    for (OpOperand &use :
         llvm::make_early_inc_range(unpack.getResult().getUses())) {
      std::optional<unsigned> kDim = panelBReductionDim(use, width, lanes);
      if (!kDim)
        continue;
      auto op = cast<linalg::GenericOp>(use.getOwner());
      if (pairs) {
        if (isF32MulAddBody(op, use) &&
            llvm::count(op->getOperands(), unpack.getResult()) == 1)
          foldPairPanels(rewriter, op, use, unpack.getPanels(), width, *kDim);
        continue;
      }
      SmallVector<AffineMap> maps = op.getIndexingMapsArray();
      unsigned index = use.getOperandNumber();
      maps[index] = getPanelOperandMap(maps[index], width);
      rewriter.modifyOpInPlace(op, [&] {
        use.set(unpack.getPanels());
        op.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
      });
    }
    if (unpack->use_empty())
      rewriter.eraseOp(unpack);
  }
}

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
          Value kIndex = linalg::IndexOp::create(b, loc, rank - 2);
          Value odd = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::ne,
              arith::RemUIOp::create(b, loc, kIndex, indexConst(b, loc, 2)),
              indexConst(b, loc, 0));
          Value value = widenPairHalf(b, loc, args[0], odd);
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
