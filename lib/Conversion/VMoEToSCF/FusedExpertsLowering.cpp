//===- FusedExpertsLowering.cpp - Lower fused_experts -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe.fused_experts -> one scf.forall over experts whose body runs two
// microkernel GEMMs on the filled rows of all groups only (each expert's
// weights are read once per call):
//
//   hidden[r] = act(x[g(r), t(r)] . w1[e] + b1[e])   (rows gathered from x)
//   plane[i(r), g(r), t(r)] = (hidden[r] . w2[e] + b2[e]) * weights[g, t, i]
//
// where row r is a filled slot of expert e in group g holding choice i of
// token t. Every (token, choice)
// has one writer, so a final elementwise pass adds the kept choices of each
// token in choice order, exactly as vmoe.combine; nothing depends on the
// schedule. The operands are read through bufferization.to_buffer; the
// row tables and hidden rows are memref.alloc ops that the deallocation
// pipeline frees, the packing scratch of the GEMMs one block's memref.alloca
// per expert on the stack of the running thread (allocaBlockScratch).
// With `weight_panels`, w1 and w2 arrive in the microkernel's panel layout
// (packed once, at model load) and the GEMMs read them in place: no packing
// scratch, no per-call repacking of the expert weights. With
// `weight_storage = bf16_pairs` the panels hold bf16 pairs: each expert's
// gathered rows are first rounded to bf16 pairs (one i32 per two k), its
// hidden rows are written as pairs by the epilogue that finishes them, and
// the GEMMs step over k pairs (BF16Pairs.h).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "Patterns.h"

#include "vmoe/Codegen/BF16Pairs.h"
#include "vmoe/Codegen/Microkernel.h"
#include "vmoe/Codegen/PanelLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::lowering;

namespace {

/// vmoe.fused_experts -> gathered GEMMs per expert and group, then the
/// choice-ordered sum of the per-choice planes.
struct FusedExpertsOpLowering : OpConversionPattern<FusedExpertsOp> {
  FusedExpertsOpLowering(MLIRContext *context, MicrokernelShape shape)
      : OpConversionPattern(context), shape(shape) {}

  LogicalResult
  matchAndRewrite(FusedExpertsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto xType = op.getX().getType();
    int64_t k = op.getSlots().getType().getDimSize(2);
    if (ShapedType::isDynamic(k))
      return rewriter.notifyMatchFailure(op, "k must be static");
    if (!xType.getElementType().isF32())
      return rewriter.notifyMatchFailure(op, "only f32 is lowered");
    Activation activation = op.getActivation();

    Value x = readOnlyBuffer(b, loc, adaptor.getX());
    Value weights = readOnlyBuffer(b, loc, adaptor.getWeights());
    Value entries = readOnlyBuffer(b, loc, adaptor.getSlotEntries());
    Value fill = readOnlyBuffer(b, loc, adaptor.getFill());
    Value w1 = readOnlyBuffer(b, loc, adaptor.getW1());
    Value b1 = readOnlyBuffer(b, loc, adaptor.getB1());
    Value w2 = readOnlyBuffer(b, loc, adaptor.getW2());
    Value b2 = readOnlyBuffer(b, loc, adaptor.getB2());
    Value wUp = adaptor.getWUp() ? readOnlyBuffer(b, loc, adaptor.getWUp())
                                 : Value();
    auto dim = [&](Value memref, int64_t i) {
      return getValueOrCreateConstantIndexOp(
          b, loc, memref::getMixedSize(b, loc, memref, i));
    };
    Value g = dim(x, 0), s = dim(x, 1), d = dim(x, 2);
    FailureOr<std::optional<int64_t>> panels =
        expertPanelWidth(op, op.getWeightPanels(), shape);
    if (failed(panels))
      return failure();
    std::optional<int64_t> panelWidth = *panels;
    bool bf16Pairs = op.getWeightStorage() == PanelStorage::bf16_pairs;
    Value capacity = dim(entries, 2), h = dim(b1, 1);
    auto staticDim = [](Type type, int64_t i) -> std::optional<int64_t> {
      int64_t size = cast<ShapedType>(type).getDimSize(i);
      if (ShapedType::isDynamic(size))
        return std::nullopt;
      return size;
    };
    std::optional<int64_t> staticH = staticDim(op.getB1().getType(), 1);
    std::optional<int64_t> staticD = staticDim(xType, 2);

    // One plane [G, S, D] per choice; plane i, row t is written by the
    // expert holding choice i of t, if any.
    auto planesType =
        MemRefType::get({k, xType.getDimSize(0), xType.getDimSize(1),
                         xType.getDimSize(2)},
                        b.getF32Type());
    SmallVector<Value> planeSizes;
    for (auto [i, size] : llvm::enumerate(planesType.getShape()))
      if (ShapedType::isDynamic(size))
        planeSizes.push_back(i == 1 ? g : i == 2 ? s : d);
    Value planes = memref::AllocOp::create(b, loc, planesType, planeSizes,
                                           b.getI64IntegerAttr(64));
    Value kIndex = indexConst(b, loc, k);
    auto vectorType = VectorType::get({shape.lanes}, b.getF32Type());

    // One iteration per expert, over the filled rows of all its groups, so
    // that each expert's weights are read once per call.
    scf::ForallOp::create(
        b, loc,
        ArrayRef<OpFoldResult>{memref::getMixedSize(b, loc, entries, 0)},
        ValueRange{}, std::nullopt,
        [&](OpBuilder &b, Location loc, ValueRange ivs) {
          Value ex = ivs[0];
          // rowGroup[r], rowEntry[r]: the group and the slot entry of row r,
          // the filled slots of group 0, then of group 1, ...
          Value maxRows = arith::MulIOp::create(b, loc, g, capacity);
          auto tableType =
              MemRefType::get({ShapedType::kDynamic}, b.getIndexType());
          Value rowGroup = memref::AllocOp::create(b, loc, tableType,
                                                   ValueRange{maxRows});
          Value rowEntry = memref::AllocOp::create(b, loc, tableType,
                                                   ValueRange{maxRows});
          Value rows = buildLoop(
              b, loc, g, {indexConst(b, loc, 0)},
              [&](OpBuilder &b, Location loc, Value gr,
                  ValueRange acc) -> SmallVector<Value> {
                Value filled = loadIndex(b, loc, fill, {ex, gr});
                buildLoop(b, loc, filled, {},
                          [&](OpBuilder &b, Location loc, Value slot,
                              ValueRange) -> SmallVector<Value> {
                            Value r = arith::AddIOp::create(b, loc, acc[0],
                                                            slot);
                            memref::StoreOp::create(b, loc, gr, rowGroup,
                                                    ValueRange{r});
                            memref::StoreOp::create(
                                b, loc, loadIndex(b, loc, entries,
                                                  {ex, gr, slot}),
                                rowEntry, ValueRange{r});
                            return {};
                          });
                return {arith::AddIOp::create(b, loc, acc[0], filled)};
              })[0];
          Value any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt,
                                            rows, indexConst(b, loc, 0));
          scf::IfOp::create(b, loc, any, [&](OpBuilder &b, Location loc) {
            emitExpert(b, loc, ex, rowGroup, rowEntry, rows, maxRows, h, d,
                       staticH, staticD, kIndex, x, weights, w1, b1, w2, b2,
                       wUp, planes, activation, vectorType, panelWidth,
                       bf16Pairs);
            scf::YieldOp::create(b, loc);
          });
          scf::InParallelOp::create(b, loc);
        });

    Value planesTensor = bufferization::ToTensorOp::create(
        b, loc, RankedTensorType::get(planesType.getShape(), b.getF32Type()),
        planes, /*restrict=*/true, /*writable=*/true);
    rewriter.replaceOp(op, buildChoiceSum(b, loc, planesTensor,
                                          adaptor.getSlots(), adaptor.getX(),
                                          k));
    return success();
  }

  /// The two GEMMs of expert `ex` over its `rows` filled slots (all
  /// groups); row r is slot entry rowEntry[r] of group rowGroup[r]. With
  /// `wUp` (SwiGLU), a third GEMM between them multiplies the activated
  /// hidden rows by `x . wUp[e]`.
  void emitExpert(OpBuilder &b, Location loc, Value ex, Value rowGroup,
                  Value rowEntry, Value rows, Value maxRows, Value h, Value d,
                  std::optional<int64_t> staticH,
                  std::optional<int64_t> staticD, Value kIndex, Value x,
                  Value weights, Value w1, Value b1, Value w2, Value b2,
                  Value wUp, Value planes, Activation activation,
                  VectorType vectorType, std::optional<int64_t> panelWidth,
                  bool bf16Pairs) const {
    // The group, token and choice behind row `row`.
    auto groupOf = [&](OpBuilder &b, Location loc, Value row) {
      return Value(memref::LoadOp::create(b, loc, rowGroup, ValueRange{row}));
    };
    auto entry = [&](OpBuilder &b, Location loc, Value row) {
      return Value(memref::LoadOp::create(b, loc, rowEntry, ValueRange{row}));
    };
    auto tokenOf = [&](OpBuilder &b, Location loc, Value row) {
      return Value(arith::DivSIOp::create(b, loc, entry(b, loc, row), kIndex));
    };
    auto choiceOf = [&](OpBuilder &b, Location loc, Value row) {
      return Value(arith::RemSIOp::create(b, loc, entry(b, loc, row), kIndex));
    };
    Value zeros = arith::ConstantOp::create(
        b, loc, vectorType,
        DenseElementsAttr::get(vectorType, b.getF32FloatAttr(0)));
    auto zeroInit = [&](OpBuilder &, Location, Value, Value, Value) {
      return zeros;
    };

    // Plain weights: one block scratch on the stack for all GEMMs (of the
    // pass's tile). Panels are read a vector at a time: each GEMM takes the
    // tile that pads fewest of its columns (tileForColumns), or the tile
    // as wide as the panels when that is the 6 x 4 one (64-wide f32 panels
    // with 16 lanes: a tile then reads whole panel rows, 256 contiguous
    // bytes per k, where 8 x 3 would straddle two panels).
    Value scratch =
        panelWidth || bf16Pairs ? Value() : allocaBlockScratch(b, loc, shape);
    auto panelTile = [&](std::optional<int64_t> columns) {
      MicrokernelShape tile = tileForColumns(shape, columns);
      MicrokernelShape wide = tileForColumns(shape, /*n=*/4 * shape.lanes);
      if (panelWidth && !bf16Pairs && *panelWidth == wide.panelWidth())
        return wide;
      return tile;
    };
    MicrokernelShape upTile = scratch ? shape : panelTile(staticH);
    MicrokernelShape downTile = scratch ? shape : panelTile(staticD);

    // GEMM 1: hidden[r] = act(x[g, t(r)] . w1[e] + b1[e]); hidden also
    // holds the partial sums between blocks of k.
    auto hiddenType = MemRefType::get(
        {ShapedType::kDynamic, staticH ? *staticH : ShapedType::kDynamic},
        b.getF32Type());
    SmallVector<Value> hiddenSizes = {maxRows};
    if (hiddenType.isDynamicDim(1))
      hiddenSizes.push_back(h);
    Value hidden = memref::AllocOp::create(b, loc, hiddenType, hiddenSizes,
                                           b.getI64IntegerAttr(64));
    // bf16 pairs: the last producer of the hidden rows (GEMM 1, or the
    // SwiGLU product) rounds its results to the pairs GEMM 2 reads, in
    // registers, instead of a second pass over f32 hidden rows (vectors of
    // an even number of lanes: whole words).
    Value hiddenPairs;
    if (bf16Pairs && shape.lanes % 2 == 0)
      hiddenPairs = allocRowPairs(b, loc, maxRows, h);
    auto storeHidden = [&](OpBuilder &b, Location loc, Value row, Value n,
                           Value value, Value mask) {
      if (hiddenPairs)
        storeRowPairs(b, loc, hiddenPairs, row, n, value, mask);
      else
        storeVector(b, loc, value, hidden, {row, n}, mask);
    };
    // An expert's few rows at small batch or capacity: one row tile, whose
    // weights stream in storage order (GemmAccessors::oneTileByPanels).
    GemmAccessors up;
    up.oneTileByPanels = true;
    up.loadA = [&](OpBuilder &b, Location loc, Value row, Value kk) {
      return Value(memref::LoadOp::create(
          b, loc, x,
          ValueRange{groupOf(b, loc, row), tokenOf(b, loc, row), kk}));
    };
    up.loadB = [&](OpBuilder &b, Location loc, Value kk, Value n, Value mask) {
      return loadVector(b, loc, vectorType, w1, {ex, kk, n}, mask);
    };
    up.initC = zeroInit;
    up.loadPartial = [&](OpBuilder &b, Location loc, Value row, Value n,
                         Value mask) {
      return loadVector(b, loc, vectorType, hidden, {row, n}, mask);
    };
    up.storePartial = [&](OpBuilder &b, Location loc, Value row, Value n,
                          Value acc, Value mask) {
      storeVector(b, loc, acc, hidden, {row, n}, mask);
    };
    up.storeC = [&](OpBuilder &b, Location loc, Value row, Value n, Value acc,
                    Value mask) {
      Value bias = loadVector(b, loc, vectorType, b1, {ex, n}, mask);
      Value v = arith::AddFOp::create(b, loc, acc, bias);
      Value activated = buildActivation(b, loc, activation, v, bf16Pairs);
      if (wUp)
        storeVector(b, loc, activated, hidden, {row, n}, mask);
      else
        storeHidden(b, loc, row, n, activated, mask);
    };
    if (bf16Pairs) {
      // The gathered rows as bf16 pairs, once per expert.
      Value xPairs = packRowPairs(
          b, loc, rows, maxRows, d, x,
          [&](OpBuilder &b, Location loc, Value row) -> SmallVector<Value> {
            return {groupOf(b, loc, row), tokenOf(b, loc, row)};
          });
      setPairLoaders(up, ex, w1, xPairs, vectorType);
    } else if (panelWidth)
      up.loadPackedB = panelLoader(ex, w1, vectorType);
    if (bf16Pairs || panelWidth)
      up.prefetchB = panelPrefetcher(ex, w1);
    emitGemm(b, loc, rows, h, d, staticH, upTile, up, scratch,
             /*parallelThreads=*/Value());

    // SwiGLU: hidden[r] = act(gate) * (x[g, t(r)] . wUp[e]), the up GEMM's
    // partial sums in a buffer of their own.
    if (wUp) {
      Value partial = memref::AllocOp::create(b, loc, hiddenType, hiddenSizes,
                                              b.getI64IntegerAttr(64));
      GemmAccessors gated = up;
      gated.loadB = [&](OpBuilder &b, Location loc, Value kk, Value n,
                        Value mask) {
        return loadVector(b, loc, vectorType, wUp, {ex, kk, n}, mask);
      };
      gated.loadPartial = [&](OpBuilder &b, Location loc, Value row, Value n,
                              Value mask) {
        return loadVector(b, loc, vectorType, partial, {row, n}, mask);
      };
      gated.storePartial = [&](OpBuilder &b, Location loc, Value row, Value n,
                               Value acc, Value mask) {
        storeVector(b, loc, acc, partial, {row, n}, mask);
      };
      gated.storeC = [&](OpBuilder &b, Location loc, Value row, Value n,
                         Value acc, Value mask) {
        Value act = loadVector(b, loc, vectorType, hidden, {row, n}, mask);
        storeHidden(b, loc, row, n, arith::MulFOp::create(b, loc, act, acc),
                    mask);
      };
      emitGemm(b, loc, rows, h, d, staticH, upTile, gated, scratch,
               /*parallelThreads=*/Value());
    }

    // GEMM 2: plane[i, g, t] = (hidden[r] . w2[e] + b2[e]) * weight; the
    // plane row of (t, i) holds the partial sums.
    GemmAccessors down;
    down.oneTileByPanels = true;
    down.loadA = [&](OpBuilder &b, Location loc, Value row, Value kk) {
      return Value(memref::LoadOp::create(b, loc, hidden, ValueRange{row, kk}));
    };
    down.loadB = [&](OpBuilder &b, Location loc, Value kk, Value n,
                     Value mask) {
      return loadVector(b, loc, vectorType, w2, {ex, kk, n}, mask);
    };
    down.initC = zeroInit;
    auto planeRow = [&](OpBuilder &b, Location loc, Value row, Value n) {
      return SmallVector<Value>{choiceOf(b, loc, row), groupOf(b, loc, row),
                                tokenOf(b, loc, row), n};
    };
    down.loadPartial = [&](OpBuilder &b, Location loc, Value row, Value n,
                           Value mask) {
      return loadVector(b, loc, vectorType, planes, planeRow(b, loc, row, n),
                        mask);
    };
    down.storePartial = [&](OpBuilder &b, Location loc, Value row, Value n,
                            Value acc, Value mask) {
      storeVector(b, loc, acc, planes, planeRow(b, loc, row, n), mask);
    };
    down.storeC = [&](OpBuilder &b, Location loc, Value row, Value n,
                      Value acc, Value mask) {
      Value bias = loadVector(b, loc, vectorType, b2, {ex, n}, mask);
      Value y = arith::AddFOp::create(b, loc, acc, bias);
      Value w = memref::LoadOp::create(
          b, loc, weights,
          ValueRange{groupOf(b, loc, row), tokenOf(b, loc, row),
                     choiceOf(b, loc, row)});
      Value scaled = arith::MulFOp::create(
          b, loc, vector::BroadcastOp::create(b, loc, vectorType, w), y);
      storeVector(b, loc, scaled, planes, planeRow(b, loc, row, n), mask);
    };
    // The plane rows the epilogue writes, fetched while the tile computes.
    down.prefetchC = [&](OpBuilder &b, Location loc, Value row, Value n) {
      memref::PrefetchOp::create(b, loc, planes, planeRow(b, loc, row, n),
                                 /*isWrite=*/true, /*localityHint=*/3,
                                 /*isDataCache=*/true);
    };
    if (bf16Pairs) {
      if (!hiddenPairs)
        hiddenPairs = packRowPairs(
            b, loc, rows, maxRows, h, hidden,
            [&](OpBuilder &b, Location loc, Value row) -> SmallVector<Value> {
              return {row};
            });
      setPairLoaders(down, ex, w2, hiddenPairs, vectorType);
    } else if (panelWidth)
      down.loadPackedB = panelLoader(ex, w2, vectorType);
    if (bf16Pairs || panelWidth)
      down.prefetchB = panelPrefetcher(ex, w2);
    emitGemm(b, loc, rows, d, h, staticD, downTile, down, scratch,
             /*parallelThreads=*/Value());
  }

  /// Reads B[k, n .. n + lanes) of expert `ex` from the panels `w`
  /// [E, P, K, width] in place (loadPanelVector).
  static std::function<Value(OpBuilder &, Location, Value, Value)>
  panelLoader(Value ex, Value w, VectorType vectorType) {
    return [=](OpBuilder &b, Location loc, Value k, Value n) {
      return loadPanelVector(b, loc, vectorType, w, ValueRange{ex}, k, n);
    };
  }

  /// Prefetches what panelLoader reads at (k, n).
  static std::function<void(OpBuilder &, Location, Value, Value)>
  panelPrefetcher(Value ex, Value w) {
    return [=](OpBuilder &b, Location loc, Value k, Value n) {
      prefetchPanelVector(b, loc, w, ValueRange{ex}, k, n);
    };
  }

  /// memref<maxRows x ceil(k/2) x i32> for rows of k bf16 as pair words.
  static Value allocRowPairs(OpBuilder &b, Location loc, Value maxRows,
                             Value k) {
    Value words = arith::CeilDivUIOp::create(b, loc, k, indexConst(b, loc, 2));
    auto type = MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                                b.getI32Type());
    return memref::AllocOp::create(b, loc, type, ValueRange{maxRows, words},
                                   b.getI64IntegerAttr(64));
  }

  /// Rounds `value` (vector<lanes x f32>, columns n .. n + lanes of row
  /// `row`, n even) to lanes / 2 pair words at pairs[row, n / 2]; lanes
  /// past `mask` count as 0 (an odd last column's high half), as in
  /// BF16PairProducts::roundRowsToPairs, so both give the same words.
  void storeRowPairs(OpBuilder &b, Location loc, Value pairs, Value row,
                     Value n, Value value, Value mask) const {
    auto type = cast<VectorType>(value.getType());
    int64_t lanes = type.getNumElements();
    Value wordsMask;
    if (mask) {
      Value zeros = arith::ConstantOp::create(
          b, loc, type, DenseElementsAttr::get(type, b.getF32FloatAttr(0)));
      value = arith::SelectOp::create(b, loc, mask, value, zeros);
      SmallVector<int64_t> even;
      for (int64_t i = 0; i < lanes; i += 2)
        even.push_back(i);
      wordsMask = vector::ShuffleOp::create(b, loc, mask, mask, even);
    }
    Value words =
        BF16PairProducts{shape.bf16Dot, lanes / 2}.roundToPairs(b, loc, value);
    Value word = arith::DivUIOp::create(b, loc, n, indexConst(b, loc, 2));
    storeVector(b, loc, words, pairs, {row, word}, wordsMask);
  }

  /// memref<maxRows x ceil(k/2) x i32>: rows [0, rows) of an f32 matrix
  /// rounded to bf16 pairs (BF16PairProducts::roundRowsToPairs); row r is
  /// source[prefix(r)..., 0 .. k).
  Value
  packRowPairs(OpBuilder &b, Location loc, Value rows, Value maxRows, Value k,
               Value source,
               function_ref<SmallVector<Value>(OpBuilder &, Location, Value)>
                   prefix) const {
    Value pairs = allocRowPairs(b, loc, maxRows, k);
    BF16PairProducts{shape.bf16Dot, shape.lanes}.roundRowsToPairs(
        b, loc, pairs, rows, k, source, prefix);
    return pairs;
  }

  /// B from the bf16 pair panels `w` of expert `ex`, A from `aPairs`.
  static void setPairLoaders(GemmAccessors &access, Value ex, Value w,
                             Value aPairs, VectorType vectorType) {
    int64_t lanes = vectorType.getNumElements();
    access.loadBPairs = [=](OpBuilder &b, Location loc, Value pair, Value n) {
      return loadPairPanelWords(b, loc, lanes, w, ValueRange{ex}, pair, n);
    };
    access.loadAPair = [=](OpBuilder &b, Location loc, Value row, Value pair) {
      return Value(
          memref::LoadOp::create(b, loc, aPairs, ValueRange{row, pair}));
    };
  }

  MicrokernelShape shape;
};

} // namespace

void mlir::vmoe::lowering::populateFusedExpertsLoweringPatterns(
    RewritePatternSet &patterns, const MicrokernelShape &shape) {
  patterns.add<FusedExpertsOpLowering>(patterns.getContext(), shape);
}
