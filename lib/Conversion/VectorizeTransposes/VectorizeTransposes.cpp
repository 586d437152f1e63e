//===- VectorizeTransposes.cpp - vmoe-vectorize-transposes ------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Buffer-level linalg copies that transpose (the innermost dim of the input
// is another loop dim than the innermost dim of the output, attention's
// k -> kᵀ) -> loops over 16 x 16 tiles: 16 row loads along the input's
// contiguous dim, a vector.transpose lowered to shuffles (shuffle_16x16),
// 16 row stores along the output's contiguous dim. Loops over the elements
// vectorized by LLVM gather or scatter one element per lane instead.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Conversion/Passes.h"

#include "vmoe/Codegen/MemRefShapes.h"
#include "vmoe/Codegen/Microkernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEVECTORIZETRANSPOSESPASS
#include "vmoe/Conversion/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;
using namespace mlir::vmoe;

/// Lanes of a tile: shuffle_16x16 transposes 16 x 16 32-bit elements.
static constexpr int64_t kTile = 16;

/// Transpositions with fewer elements than this stay on one thread.
static constexpr int64_t kParallelElements = 1 << 16;

/// The loop dims a transposing copy reads and writes contiguously:
/// {input's innermost, output's innermost}, or nothing when `op` is not a
/// transposing copy of 32-bit floats between memrefs with unit-stride rows.
static std::optional<std::pair<unsigned, unsigned>>
matchTransposingCopy(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 1 ||
      op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops())
    return std::nullopt;
  auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
  if (op.getBody()->getOperations().size() != 1 ||
      yield.getValues().size() != 1 ||
      yield.getValues()[0] != op.getBody()->getArgument(0))
    return std::nullopt;
  auto in = dyn_cast<MemRefType>(op.getDpsInputs()[0].getType());
  auto out = dyn_cast<MemRefType>(op.getDpsInits()[0].getType());
  if (!in || !out || !in.getElementType().isF32() ||
      !out.getElementType().isF32() || !hasUnitInnerStride(in) ||
      !hasUnitInnerStride(out))
    return std::nullopt;
  AffineMap inMap = op.getIndexingMapsArray()[0];
  AffineMap outMap = op.getIndexingMapsArray()[1];
  if (!inMap.isPermutation() || !outMap.isPermutation())
    return std::nullopt;
  unsigned a = cast<AffineDimExpr>(inMap.getResults().back()).getPosition();
  unsigned b = cast<AffineDimExpr>(outMap.getResults().back()).getPosition();
  if (a == b)
    return std::nullopt;
  return std::make_pair(a, b);
}

/// Rewrites a transposing copy (matchTransposingCopy) into tile loops.
static void vectorizeTranspose(RewriterBase &rewriter, linalg::GenericOp op,
                               unsigned aDim, unsigned bDim, bool parallel) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  auto index = [&](OpBuilder &b, int64_t v) {
    return Value(arith::ConstantIndexOp::create(b, loc, v));
  };
  auto linalgOp = cast<linalg::LinalgOp>(op.getOperation());
  SmallVector<Range, 4> ranges = linalgOp.createLoopRanges(rewriter, loc);
  auto size = [&](unsigned d) {
    return getValueOrCreateConstantIndexOp(rewriter, loc, ranges[d].size);
  };
  SmallVector<int64_t> staticSizes = linalgOp.getStaticLoopRanges();
  Value in = op.getDpsInputs()[0], out = op.getDpsInits()[0];
  AffineMap inMap = op.getIndexingMapsArray()[0];
  AffineMap outMap = op.getIndexingMapsArray()[1];
  auto vectorType = VectorType::get({kTile}, rewriter.getF32Type());
  auto tileType = VectorType::get({kTile, kTile}, rewriter.getF32Type());
  Value aSize = size(aDim), bSize = size(bDim);
  // A dim whose size is not a known multiple of the tile needs edge code.
  auto edge = [&](unsigned d) {
    return ShapedType::isDynamic(staticSizes[d]) || staticSizes[d] % kTile;
  };
  bool aEdge = edge(aDim), bEdge = edge(bDim);

  auto indicesOf = [](AffineMap map, const DenseMap<unsigned, Value> &ivs) {
    SmallVector<Value> indices;
    for (AffineExpr e : map.getResults())
      indices.push_back(ivs.lookup(cast<AffineDimExpr>(e).getPosition()));
    return indices;
  };
  // One tile: input rows b0 + r (r < 16, clamped to the last row so that
  // every load is in bounds; the extra rows' lanes are masked out of the
  // stores), columns a0 .. a0 + 15 masked past the size of a; then the
  // transposed rows a0 + s, stored for s below the columns left.
  auto tile = [&](OpBuilder &b, Location loc, DenseMap<unsigned, Value> ivs,
                  Value a0, Value b0) {
    Value aLeft = arith::SubIOp::create(b, loc, aSize, a0);
    Value bLeft = arith::SubIOp::create(b, loc, bSize, b0);
    Value aMask = aEdge ? Value(vector::CreateMaskOp::create(
                              b, loc, VectorType::get({kTile}, b.getI1Type()),
                              ValueRange{aLeft}))
                        : Value();
    Value bMask = bEdge ? Value(vector::CreateMaskOp::create(
                              b, loc, VectorType::get({kTile}, b.getI1Type()),
                              ValueRange{bLeft}))
                        : Value();
    Value lastRow =
        bEdge ? Value(arith::SubIOp::create(b, loc, bSize, index(b, 1)))
              : Value();
    Value block = arith::ConstantOp::create(b, loc, tileType,
                                            b.getZeroAttr(tileType));
    for (int64_t r = 0; r < kTile; ++r) {
      Value row = arith::AddIOp::create(b, loc, b0, index(b, r));
      if (bEdge)
        row = arith::MinSIOp::create(b, loc, row, lastRow);
      ivs[bDim] = row;
      ivs[aDim] = a0;
      Value values =
          loadVector(b, loc, vectorType, in, indicesOf(inMap, ivs), aMask);
      block = vector::InsertOp::create(b, loc, values, block, r);
    }
    Value transposed =
        vector::TransposeOp::create(b, loc, block, ArrayRef<int64_t>{1, 0});
    for (int64_t s = 0; s < kTile; ++s) {
      Value column = vector::ExtractOp::create(b, loc, transposed, s);
      ivs[aDim] = arith::AddIOp::create(b, loc, a0, index(b, s));
      ivs[bDim] = b0;
      SmallVector<Value> at = indicesOf(outMap, ivs);
      if (!aEdge) {
        storeVector(b, loc, column, out, at, bMask);
        continue;
      }
      Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                           index(b, s), aLeft);
      scf::IfOp::create(b, loc, inside, [&](OpBuilder &b, Location loc) {
        storeVector(b, loc, column, out, at, bMask);
        scf::YieldOp::create(b, loc);
      });
    }
  };

  // Outer loops over the other dims (scf.parallel when large), then the
  // tiles of (b, a).
  SmallVector<unsigned> outerDims;
  for (unsigned d = 0, e = op.getNumLoops(); d < e; ++d)
    if (d != aDim && d != bDim)
      outerDims.push_back(d);
  int64_t elements = staticProduct(staticSizes);
  bool large = ShapedType::isDynamic(elements) || elements >= kParallelElements;
  auto tiles = [&](OpBuilder &b, Location loc,
                   const DenseMap<unsigned, Value> &ivs) {
    scf::ForOp::create(
        b, loc, index(b, 0), bSize, index(b, kTile), ValueRange{},
        [&](OpBuilder &b, Location loc, Value b0, ValueRange) {
          scf::ForOp::create(
              b, loc, index(b, 0), aSize, index(b, kTile), ValueRange{},
              [&](OpBuilder &b, Location loc, Value a0, ValueRange) {
                tile(b, loc, ivs, a0, b0);
                scf::YieldOp::create(b, loc);
              });
          scf::YieldOp::create(b, loc);
        });
  };
  DenseMap<unsigned, Value> ivs;
  if (outerDims.empty()) {
    tiles(rewriter, loc, ivs);
  } else {
    SmallVector<Value> lbs, ubs, steps;
    for (unsigned d : outerDims) {
      lbs.push_back(index(rewriter, 0));
      ubs.push_back(size(d));
      steps.push_back(index(rewriter, 1));
    }
    auto body = [&](OpBuilder &b, Location loc, ValueRange outer) {
      for (auto [d, iv] : llvm::zip_equal(outerDims, outer))
        ivs[d] = iv;
      tiles(b, loc, ivs);
    };
    if (parallel && large) {
      scf::ParallelOp::create(rewriter, loc, lbs, ubs, steps, body);
    } else {
      // Nested scf.for loops, outermost first.
      std::function<void(OpBuilder &, Location, unsigned, SmallVector<Value>)>
          nest = [&](OpBuilder &b, Location loc, unsigned level,
                     SmallVector<Value> outer) {
            if (level == outerDims.size()) {
              body(b, loc, outer);
              return;
            }
            scf::ForOp::create(
                b, loc, lbs[level], ubs[level], steps[level], ValueRange{},
                [&](OpBuilder &b, Location loc, Value iv, ValueRange) {
                  outer.push_back(iv);
                  nest(b, loc, level + 1, outer);
                  scf::YieldOp::create(b, loc);
                });
          };
      nest(rewriter, loc, 0, {});
    }
  }
  rewriter.eraseOp(op);
}

namespace mlir::vmoe {
namespace {

struct VMoEVectorizeTransposesPass
    : impl::VMoEVectorizeTransposesPassBase<VMoEVectorizeTransposesPass> {
  using Base::Base;

  void runOnOperation() override {
    // 16 lanes: AVX-512 vectors; narrower targets keep the element loops.
    if (lanes != kTile)
      return;
    SmallVector<std::pair<linalg::GenericOp, std::pair<unsigned, unsigned>>>
        copies;
    getOperation().walk([&](linalg::GenericOp op) {
      if (auto dims = matchTransposingCopy(op))
        copies.push_back({op, *dims});
    });
    if (copies.empty())
      return;
    IRRewriter rewriter(&getContext());
    for (auto [op, dims] : copies)
      vectorizeTranspose(rewriter, op, dims.first, dims.second, parallel);
    // The 16 x 16 transposes to shuffles now, before convert-vector-to-llvm
    // would lower them element by element.
    RewritePatternSet patterns(&getContext());
    vector::populateVectorTransposeLoweringPatterns(
        patterns, vector::VectorTransposeLowering::Shuffle16x16);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
} // namespace mlir::vmoe
