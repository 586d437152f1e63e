//===- AttentionLowering.cpp - Lower vmoe.attention -------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe.attention with bf16_products -> one scf.forall over the N x H
// (image, head) items; each item stays on its thread's stack, with the
// scores transposed so that the softmax runs down columns of vectors (no
// horizontal reductions, every lane a query):
//
//   kPairs  = k[n, :, h, :] rounded to bf16 pairs          [T, ceil(dh/2)]
//   qPanels = q[n, :, h, :]ᵀ as pair panels                 (L x L tiles of
//             words transposed in registers)
//   sT      = kPairs . qPanels / sqrt(dh)                   [T, Tq] f32
//   pPairsT = softmax over j of sT[j, i], as pairs of j     [ceil(T/2), Tq]
//   vPanels = v[n, :, h, :] as pair panels
//   result[n, :, h, :] = p . vPanels  (A's pair (i, w) read at pPairsT[w, i])
//
// The GEMMs are the pair microkernel (emitGemm over BF16Pairs.h words), so
// the products are the ones of the unfused bf16 contractions. The scratch
// is memref.alloca ops marked vmoe.stack_scratch (freed per item). Items
// whose scratch would pass kMaxItemScratchBytes, and the form without bf16
// products, lower to linalg.generic ops instead
// (vmoe/Utils/AttentionBuilder.h).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "Patterns.h"

#include "vmoe/Codegen/BF16PairContraction.h"
#include "vmoe/Codegen/BF16Pairs.h"
#include "vmoe/Codegen/Microkernel.h"
#include "vmoe/Codegen/PanelLayout.h"
#include "vmoe/Utils/AttentionBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::lowering;

namespace {

/// Stack bytes one item may take (scores, pairs and panels); larger items
/// (long sequences) use the unfused contractions.
constexpr int64_t kMaxItemScratchBytes = 512 * 1024;

/// A buffer of `tensor` [N, T, H, dh] read in place: any strides but a
/// contiguous last dim (q, k and v are strided views of the qkv
/// projection).
Value stridedReadBuffer(OpBuilder &b, Location loc, Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<int64_t> strides(type.getRank(), ShapedType::kDynamic);
  strides.back() = 1;
  auto layout =
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, strides);
  return bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType(), layout),
      tensor, /*read_only=*/true);
}

/// A memref.alloca freed at the end of the item (vmoe.stack_scratch).
Value itemScratch(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                  Type elementType) {
  auto alloca = memref::AllocaOp::create(
      b, loc, MemRefType::get(shape, elementType), b.getI64IntegerAttr(64));
  alloca->setAttr(kStackScratchAttrName, b.getUnitAttr());
  return alloca;
}

struct AttentionOpLowering : OpConversionPattern<AttentionOp> {
  AttentionOpLowering(MLIRContext *context, MicrokernelShape shape)
      : OpConversionPattern(context), shape(shape) {}

  /// The static sizes of one item's scratch.
  struct Sizes {
    int64_t n, t, heads, dh, tq;
    MicrokernelShape scoresTile, contextTile;
    int64_t qPanels, vPanels, scoresStride, dhWords, tWords;

    int64_t bytes() const {
      int64_t lanes = scoresTile.lanes;
      return 4 * (t * dhWords + qPanels * dhWords * lanes + t * scoresStride +
                  tWords * scoresStride + vPanels * tWords * lanes);
    }
  };

  LogicalResult
  matchAndRewrite(AttentionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto qType = op.getQ().getType();
    auto kType = op.getK().getType();
    if (!qType.hasStaticShape() || !kType.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "needs static shapes");
    Sizes sizes;
    sizes.n = kType.getDimSize(0);
    sizes.t = kType.getDimSize(1);
    sizes.heads = kType.getDimSize(2);
    sizes.dh = kType.getDimSize(3);
    sizes.tq = qType.getDimSize(1);
    int64_t lanes = shape.lanes;
    sizes.scoresTile = tileForColumns(shape, sizes.tq);
    sizes.contextTile = tileForColumns(shape, sizes.dh);
    int64_t scoresWidth = sizes.scoresTile.panelWidth();
    int64_t contextWidth = sizes.contextTile.panelWidth();
    // Every tile of a GEMM reads whole panels (zero past the columns) and
    // the first one stores whole vectors into the scores.
    sizes.qPanels =
        llvm::divideCeil(sizes.tq, scoresWidth) * scoresWidth / lanes;
    sizes.vPanels =
        llvm::divideCeil(sizes.dh, contextWidth) * contextWidth / lanes;
    sizes.scoresStride = sizes.qPanels * lanes;
    sizes.dhWords = (sizes.dh + 1) / 2;
    sizes.tWords = (sizes.t + 1) / 2;

    if (!op.getBf16Products() || sizes.bytes() > kMaxItemScratchBytes ||
        sizes.t == 0 || sizes.dh == 0 || sizes.tq == 0) {
      ContractionBodyFn body = op.getBf16Products()
                                   ? buildBF16RoundedContractionBody
                                   : buildMultiplyAccumulateBody;
      // bf16 operands widened to f32 first: their rounding to bf16 in the
      // contractions gives them back exactly.
      auto widened = [&](Value tensor) -> Value {
        auto type = cast<RankedTensorType>(tensor.getType());
        if (type.getElementType().isF32())
          return tensor;
        Value init =
            tensor::EmptyOp::create(b, loc, type.getShape(), b.getF32Type());
        AffineMap id = b.getMultiDimIdentityMap(type.getRank());
        return linalg::GenericOp::create(
                   b, loc, init.getType(), ValueRange{tensor}, ValueRange{init},
                   {id, id},
                   SmallVector<utils::IteratorType>(
                       type.getRank(), utils::IteratorType::parallel),
                   [](OpBuilder &b, Location loc, ValueRange args) {
                     linalg::YieldOp::create(
                         b, loc,
                         ValueRange{arith::ExtFOp::create(
                             b, loc, b.getF32Type(), args[0],
                             arith::FastMathFlagsAttr())});
                   })
            .getResult(0);
      };
      rewriter.replaceOp(op, buildAttentionGenerics(
                                 b, loc, widened(adaptor.getQ()),
                                 widened(adaptor.getK()),
                                 widened(adaptor.getV()), body,
                                 /*copyKTransposed=*/!op.getBf16Products()));
      return success();
    }

    Value q = stridedReadBuffer(b, loc, adaptor.getQ());
    Value k = stridedReadBuffer(b, loc, adaptor.getK());
    Value v = stridedReadBuffer(b, loc, adaptor.getV());
    auto resultType = MemRefType::get(qType.getShape(), b.getF32Type());
    Value result = memref::AllocOp::create(b, loc, resultType, ValueRange{},
                                           b.getI64IntegerAttr(64));
    Value items = indexConst(b, loc, sizes.n * sizes.heads);
    scf::ForallOp::create(
        b, loc, ArrayRef<OpFoldResult>{items}, ValueRange{}, std::nullopt,
        [&](OpBuilder &b, Location loc, ValueRange ivs) {
          Value headsValue = indexConst(b, loc, sizes.heads);
          Value image = arith::DivUIOp::create(b, loc, ivs[0], headsValue);
          Value head = arith::RemUIOp::create(b, loc, ivs[0], headsValue);
          emitItem(b, loc, sizes, q, k, v, result, image, head);
          scf::InParallelOp::create(b, loc);
        });
    Value tensor = bufferization::ToTensorOp::create(
        b, loc, RankedTensorType::get(qType.getShape(), b.getF32Type()), result,
        /*restrict=*/true, /*writable=*/true);
    rewriter.replaceOp(op, tensor);
    return success();
  }

private:
  /// One (image, head) item: both GEMMs and the softmax between them.
  void emitItem(OpBuilder &b, Location loc, const Sizes &sizes, Value q,
                Value k, Value v, Value result, Value image, Value head) const {
    int64_t lanes = shape.lanes;
    auto index = [&](int64_t value) { return indexConst(b, loc, value); };
    BF16PairProducts products{shape.bf16Dot, lanes};
    auto f32 = b.getF32Type();
    auto i32 = b.getI32Type();
    auto vectorType = VectorType::get({lanes}, f32);
    Value zeroVector = arith::ConstantOp::create(b, loc, vectorType,
                                                 b.getZeroAttr(vectorType));
    auto markScratch = [&](Value alloca) {
      alloca.getDefiningOp()->setAttr(kStackScratchAttrName, b.getUnitAttr());
      return alloca;
    };
    auto forLoop = [&](OpBuilder &b, Location loc, Value lb, Value ub,
                       Value step, ValueRange inits,
                       function_ref<SmallVector<Value>(OpBuilder &, Location,
                                                       Value, ValueRange)>
                           body) {
      return scf::ForOp::create(
                 b, loc, lb, ub, step, inits,
                 [&](OpBuilder &b, Location loc, Value iv, ValueRange args) {
                   scf::YieldOp::create(b, loc, body(b, loc, iv, args));
                 })
          .getResults();
    };

    // k's rows and qᵀ as pairs, then sT = k qᵀ / sqrt(dh).
    Value kPairs = itemScratch(b, loc, {sizes.t, sizes.dhWords}, i32);
    products.roundRowsToPairs(b, loc, kPairs, index(sizes.t), index(sizes.dh),
                              k, [&](OpBuilder &, Location, Value row) {
                                return SmallVector<Value>{image, row, head};
                              });
    Value qPanels = markScratch(products.packPanels(
        b, loc, q, sizes.qPanels, /*k=*/sizes.dh, /*n=*/sizes.tq,
        /*transposed=*/true, [&](OpBuilder &, Location, Value c, Value i) {
          return SmallVector<Value>{image, i, head, c};
        }));
    Value scores = itemScratch(b, loc, {sizes.t, sizes.scoresStride}, f32);
    // The scale: a multiplication when 1 / sqrt(dh) is exact (dh an even
    // power of 2: the values of the division), else the division.
    double root = std::sqrt(static_cast<double>(sizes.dh));
    bool exactInverse =
        llvm::isPowerOf2_64(sizes.dh) && root == std::floor(root);
    Value scale =
        floatConst(b, loc, vectorType, exactInverse ? 1 / root : root);
    GemmAccessors scoresAccess = pairAccessors(kPairs, qPanels, false);
    scoresAccess.initC = [&](OpBuilder &, Location, Value, Value, Value) {
      return zeroVector;
    };
    scoresAccess.loadPartial = [&](OpBuilder &b, Location loc, Value row,
                                   Value n, Value) {
      return Value(vector::LoadOp::create(b, loc, vectorType, scores,
                                          ValueRange{row, n}));
    };
    scoresAccess.storePartial = [&](OpBuilder &b, Location loc, Value row,
                                    Value n, Value acc, Value) {
      vector::StoreOp::create(b, loc, acc, scores, ValueRange{row, n});
    };
    scoresAccess.storeC = [&](OpBuilder &b, Location loc, Value row, Value n,
                              Value acc, Value) {
      Value scaled = exactInverse
                         ? Value(arith::MulFOp::create(b, loc, acc, scale))
                         : Value(arith::DivFOp::create(b, loc, acc, scale));
      vector::StoreOp::create(b, loc, scaled, scores, ValueRange{row, n});
    };
    emitGemm(b, loc, index(sizes.t), index(sizes.tq), index(sizes.dh), sizes.tq,
             sizes.scoresTile, scoresAccess, /*scratch=*/Value(),
             /*parallelThreads=*/Value());

    // The softmax of each query (a lane), down the keys: the maximum (one
    // vmaxps per key; arith.maximumf's NaN and signed-zero handling cost
    // four more instructions, and neither changes a probability), the
    // exponentials (stored back) and their sum, then the probabilities
    // (times 1 / sum: they are rounded to bf16 next, which hides the last
    // f32 bit) rounded to pairs of consecutive keys.
    Value pPairs = itemScratch(b, loc, {sizes.tWords, sizes.scoresStride}, i32);
    double inf = std::numeric_limits<double>::infinity();
    Value minusInf = floatConst(b, loc, vectorType, -inf);
    Value one = floatConst(b, loc, vectorType, 1.0);
    SmallVector<int64_t> interleave;
    for (int64_t i = 0; i < lanes; ++i)
      interleave.append({i, lanes + i});
    Value t = index(sizes.t), zero = index(0), unit = index(1);
    forLoop(
        b, loc, zero, index(sizes.scoresStride), index(lanes), {},
        [&](OpBuilder &b, Location loc, Value c0,
            ValueRange) -> SmallVector<Value> {
          auto load = [&](OpBuilder &b, Location loc, Value j) {
            return Value(vector::LoadOp::create(b, loc, vectorType, scores,
                                                ValueRange{j, c0}));
          };
          Value max =
              forLoop(b, loc, zero, t, unit, {minusInf},
                      [&](OpBuilder &b, Location loc, Value j,
                          ValueRange acc) -> SmallVector<Value> {
                        // x > max ? x : max, one vmaxps (NaN
                        // scores leave the maximum; their exp
                        // still makes the sum NaN).
                        Value x = load(b, loc, j);
                        return {arith::SelectOp::create(
                            b, loc,
                            arith::CmpFOp::create(
                                b, loc, arith::CmpFPredicate::OGT, x, acc[0]),
                            x, acc[0])};
                      })[0];
          Value sum = forLoop(
              b, loc, zero, t, unit, {zeroVector},
              [&](OpBuilder &b, Location loc, Value j,
                  ValueRange acc) -> SmallVector<Value> {
                Value e = math::ExpOp::create(
                    b, loc,
                    arith::SubFOp::create(b, loc, load(b, loc, j), max));
                vector::StoreOp::create(b, loc, e, scores, ValueRange{j, c0});
                return {arith::AddFOp::create(b, loc, acc[0], e)};
              })[0];
          Value inverse = arith::DivFOp::create(b, loc, one, sum);
          forLoop(
              b, loc, zero, index(sizes.tWords), unit, {},
              [&](OpBuilder &b, Location loc, Value w,
                  ValueRange) -> SmallVector<Value> {
                Value even = arith::MulIOp::create(b, loc, w, index(2));
                Value odd = arith::AddIOp::create(b, loc, even, unit);
                Value hasOdd = arith::CmpIOp::create(
                    b, loc, arith::CmpIPredicate::ult, odd, t);
                Value evenP =
                    arith::MulFOp::create(b, loc, load(b, loc, even), inverse);
                Value oddP = arith::SelectOp::create(
                    b, loc, hasOdd,
                    arith::MulFOp::create(b, loc,
                                          load(b, loc,
                                               arith::SelectOp::create(
                                                   b, loc, hasOdd, odd, even)),
                                          inverse),
                    zeroVector);
                Value pair =
                    vector::ShuffleOp::create(b, loc, evenP, oddP, interleave);
                vector::StoreOp::create(b, loc,
                                        products.roundToPairs(b, loc, pair),
                                        pPairs, ValueRange{w, c0});
                return {};
              });
          return {};
        });

    // v as pair panels, then result[n, :, h, :] = p v.
    Value vPanels = markScratch(products.packPanels(
        b, loc, v, sizes.vPanels, /*k=*/sizes.t, /*n=*/sizes.dh,
        /*transposed=*/false, [&](OpBuilder &, Location, Value j, Value c) {
          return SmallVector<Value>{image, j, head, c};
        }));
    GemmAccessors contextAccess =
        pairAccessors(pPairs, vPanels, /*aTransposed=*/true);
    auto at = [&](Value row, Value c) {
      return SmallVector<Value>{image, row, head, c};
    };
    contextAccess.initC = [&](OpBuilder &, Location, Value, Value, Value) {
      return zeroVector;
    };
    contextAccess.loadPartial = [&](OpBuilder &b, Location loc, Value row,
                                    Value c, Value mask) {
      return loadVector(b, loc, vectorType, result, at(row, c), mask);
    };
    contextAccess.storePartial = [&](OpBuilder &b, Location loc, Value row,
                                     Value c, Value acc, Value mask) {
      storeVector(b, loc, acc, result, at(row, c), mask);
    };
    contextAccess.storeC = contextAccess.storePartial;
    emitGemm(b, loc, index(sizes.tq), index(sizes.dh), index(sizes.t), sizes.dh,
             sizes.contextTile, contextAccess, /*scratch=*/Value(),
             /*parallelThreads=*/Value());
  }

  /// A from pair rows [rows, words] (or, `aTransposed`, [words, rows]),
  /// B from pair panels [P, words, lanes].
  GemmAccessors pairAccessors(Value aPairs, Value bPanels,
                              bool aTransposed) const {
    GemmAccessors access;
    int64_t lanes = shape.lanes;
    access.loadAPair = [aPairs, aTransposed](OpBuilder &b, Location loc,
                                             Value row, Value pair) {
      return Value(memref::LoadOp::create(b, loc, aPairs,
                                          aTransposed ? ValueRange{pair, row}
                                                      : ValueRange{row, pair}));
    };
    access.loadBPairs = [bPanels, lanes](OpBuilder &b, Location loc, Value pair,
                                         Value n) {
      return loadPairPanelWords(b, loc, lanes, bPanels, ValueRange{}, pair, n);
    };
    return access;
  }

  MicrokernelShape shape;
};

} // namespace

void mlir::vmoe::lowering::populateAttentionLoweringPatterns(
    RewritePatternSet &patterns, const MicrokernelShape &shape) {
  patterns.add<AttentionOpLowering>(patterns.getContext(), shape);
}
