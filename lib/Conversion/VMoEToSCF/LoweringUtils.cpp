//===- LoweringUtils.cpp - Builders shared by the vmoe lowerings -*- C++ -*-=//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "vmoe/Codegen/PanelLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::lowering;

/// Offsets and sizes of the row at `prefix` whose last dim spans `size`.
static void rowSlice(OpBuilder &b, ArrayRef<OpFoldResult> prefix,
                     OpFoldResult size, SmallVectorImpl<OpFoldResult> &offsets,
                     SmallVectorImpl<OpFoldResult> &sizes) {
  offsets.assign(prefix.begin(), prefix.end());
  offsets.push_back(b.getIndexAttr(0));
  sizes.assign(prefix.size(), b.getIndexAttr(1));
  sizes.push_back(size);
}

Value lowering::loadIndex(OpBuilder &b, Location loc, Value memref,
                         ValueRange indices) {
  Value v = memref::LoadOp::create(b, loc, memref, indices);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}

Value lowering::extractRow(OpBuilder &b, Location loc, Value source,
                         ArrayRef<OpFoldResult> prefix, OpFoldResult size) {
  SmallVector<OpFoldResult> offsets, sizes;
  rowSlice(b, prefix, size, offsets, sizes);
  auto sourceType = cast<RankedTensorType>(source.getType());
  auto rowType = RankedTensorType::get(
      {sourceType.getShape().back()}, sourceType.getElementType());
  return tensor::ExtractSliceOp::create(b, loc, rowType, source, offsets,
                                        sizes, unitStrides(b, sizes.size()));
}

Value lowering::insertRow(OpBuilder &b, Location loc, Value row, Value dest,
                        ArrayRef<OpFoldResult> prefix, OpFoldResult size) {
  SmallVector<OpFoldResult> offsets, sizes;
  rowSlice(b, prefix, size, offsets, sizes);
  return tensor::InsertSliceOp::create(b, loc, row, dest, offsets, sizes,
                                       unitStrides(b, sizes.size()));
}

Value lowering::insertScalar(OpBuilder &b, Location loc, Value value,
                           Value dest, ArrayRef<OpFoldResult> at) {
  SmallVector<OpFoldResult> ones(at.size(), b.getIndexAttr(1));
  Value cell = tensor::ExtractSliceOp::create(b, loc, dest, at, ones,
                                              unitStrides(b, at.size()));
  SmallVector<Value> zeros(at.size(), indexConst(b, loc, 0));
  return tensor::InsertOp::create(b, loc, value, cell, zeros);
}

scf::ForallOp lowering::buildForall(OpBuilder &b, Location loc,
                                  ArrayRef<OpFoldResult> upperBounds,
                                  ValueRange outputs, ForallBodyFn body) {
  auto forall =
      scf::ForallOp::create(b, loc, upperBounds, outputs, std::nullopt);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(forall.getTerminator());
  SmallVector<ParallelInsert> inserts =
      body(b, loc, forall.getInductionVars(), forall.getRegionOutArgs());
  b.setInsertionPointToStart(forall.getTerminator().getBody());
  for (ParallelInsert &insert : inserts)
    tensor::ParallelInsertSliceOp::create(
        b, loc, insert.source,
        forall.getRegionOutArgs()[insert.sharedOutIndex], insert.offsets,
        insert.sizes, unitStrides(b, insert.sizes.size()));
  return forall;
}

ValueRange lowering::buildLoop(OpBuilder &b, Location loc, Value upperBound,
                             ValueRange init, LoopBodyFn body) {
  auto loop = scf::ForOp::create(
      b, loc, indexConst(b, loc, 0), upperBound, indexConst(b, loc, 1), init,
      [&](OpBuilder &nested, Location nestedLoc, Value iv, ValueRange args) {
        scf::YieldOp::create(nested, nestedLoc,
                             body(nested, nestedLoc, iv, args));
      });
  return loop.getResults();
}

Value lowering::buildOrderKey(OpBuilder &b, Location loc, Value v, Value e) {
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  auto i32Const = [&](int64_t c) {
    return arith::ConstantIntOp::create(b, loc, i32, c);
  };
  // -0 + 0 = +0: the two zeros tie, as OEQ has them.
  Value zeroed = arith::AddFOp::create(b, loc, v,
                                       floatConst(b, loc, b.getF32Type(), 0));
  Value bits = arith::BitcastOp::create(b, loc, i32, zeroed);
  // Negative values: flip all but the sign bit (larger magnitude, smaller).
  Value sign = arith::ShRSIOp::create(b, loc, bits, i32Const(31));
  Value ordered = arith::XOrIOp::create(
      b, loc, bits, arith::AndIOp::create(b, loc, sign, i32Const(0x7fffffff)));
  // NaN: INT32_MIN, below -inf's 0x807fffff.
  Value isNaN =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, v, v);
  ordered = arith::SelectOp::create(
      b, loc, isNaN, i32Const(std::numeric_limits<int32_t>::min()), ordered);
  Value high = arith::ShLIOp::create(
      b, loc, arith::ExtSIOp::create(b, loc, i64, ordered),
      arith::ConstantIntOp::create(b, loc, i64, 32));
  Value low = arith::SubIOp::create(
      b, loc, arith::ConstantIntOp::create(b, loc, i64, 0xffffffffLL),
      arith::IndexCastOp::create(b, loc, i64, e));
  return arith::OrIOp::create(b, loc, high, low);
}

ValueRange lowering::buildTopK(OpBuilder &b, Location loc, Value key,
                             ValueRange prefix, Value n, Value k,
                             ValueRange init, TopKChoiceFn onChoice) {
  Type elementType = cast<RankedTensorType>(key.getType()).getElementType();
  assert(elementType.isF32() && "top-k keys are f32");
  Type i64 = b.getI64Type();
  double inf = std::numeric_limits<double>::infinity();
  // Below every entry's key, and not the identity of the maximum (so that
  // the reduction stays a plain one LLVM vectorizes).
  Value none = arith::ConstantIntOp::create(
      b, loc, i64, std::numeric_limits<int64_t>::min() + 1);
  SmallVector<Value> outerInit = {arith::ConstantIntOp::create(
      b, loc, i64, std::numeric_limits<int64_t>::max())};
  llvm::append_range(outerInit, init);
  ValueRange results = buildLoop(
      b, loc, k, outerInit,
      [&](OpBuilder &b, Location loc, Value i, ValueRange args) {
        Value previous = args[0];
        // The largest key below the previous choice's: one maximum over the
        // row (a running best value and index does not vectorize).
        Value best = buildLoop(
            b, loc, n, {none},
            [&](OpBuilder &b, Location loc, Value e,
                ValueRange acc) -> SmallVector<Value> {
              SmallVector<Value> indices(prefix);
              indices.push_back(e);
              Value v = tensor::ExtractOp::create(b, loc, key, indices);
              Value entryKey = buildOrderKey(b, loc, v, e);
              Value eligible = arith::AndIOp::create(
                  b, loc,
                  arith::CmpFOp::create(b, loc, arith::CmpFPredicate::ORD, v,
                                        v),
                  arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                        entryKey, previous));
              return {arith::MaxSIOp::create(
                  b, loc, acc[0],
                  arith::SelectOp::create(b, loc, eligible, entryKey, none))};
            })[0];
        Value found = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                            best, none);
        // The entry's index from the key's low half, and its value read
        // back (a -0 stays -0).
        Value first = arith::IndexCastOp::create(
            b, loc, b.getIndexType(),
            arith::SubIOp::create(
                b, loc, arith::ConstantIntOp::create(b, loc, i64, 0xffffffffLL),
                arith::AndIOp::create(
                    b, loc, best,
                    arith::ConstantIntOp::create(b, loc, i64, 0xffffffffLL))));
        auto value = scf::IfOp::create(
            b, loc, found,
            [&](OpBuilder &b, Location loc) {
              SmallVector<Value> indices(prefix);
              indices.push_back(first);
              scf::YieldOp::create(
                  b, loc,
                  ValueRange{tensor::ExtractOp::create(b, loc, key, indices)});
            },
            [&](OpBuilder &b, Location loc) {
              scf::YieldOp::create(
                  b, loc, ValueRange{floatConst(b, loc, elementType, -inf)});
            });
        Value index = arith::SelectOp::create(b, loc, found, first,
                                              indexConst(b, loc, -1));
        // Once no entry is left, none is left for later choices either.
        SmallVector<Value> next = {
            arith::SelectOp::create(b, loc, found, best, previous)};
        llvm::append_range(next, onChoice(b, loc, i, value.getResult(0), index,
                                          args.drop_front(1)));
        return next;
      });
  return results.drop_front(1);
}

std::optional<int64_t> lowering::staticDim(Type type, int64_t i) {
  int64_t size = cast<ShapedType>(type).getDimSize(i);
  if (ShapedType::isDynamic(size))
    return std::nullopt;
  return size;
}

void lowering::setPlainOutput(GemmAccessors &access, Value c,
                              ValueRange prefix, VectorType vectorType) {
  SmallVector<Value> base(prefix);
  auto at = [base](Value row, Value n) {
    SmallVector<Value> indices(base);
    indices.push_back(row);
    indices.push_back(n);
    return indices;
  };
  access.initC = [vectorType](OpBuilder &b, Location loc, Value, Value,
                              Value) {
    return floatConst(b, loc, vectorType, 0);
  };
  access.loadPartial = [c, at, vectorType](OpBuilder &b, Location loc,
                                           Value row, Value n, Value mask) {
    return loadVector(b, loc, vectorType, c, at(row, n), mask);
  };
  access.storePartial = [c, at](OpBuilder &b, Location loc, Value row,
                                Value n, Value acc, Value mask) {
    storeVector(b, loc, acc, c, at(row, n), mask);
  };
  access.storeC = access.storePartial;
}

void lowering::emitExpertMLP(OpBuilder &b, Location loc,
                             const MicrokernelShape &shape,
                             const ExpertMLPWeights &weights, Value ex,
                             Value rows, Value maxRows, Value d, Value h,
                             std::optional<int64_t> staticD,
                             std::optional<int64_t> staticH, RowLoadFn loadA,
                             Value out, RowIndicesFn outIndices) {
  auto vectorType = VectorType::get({shape.lanes}, b.getF32Type());
  // GEMM 1: hidden[r] = act(A[r] . w1[e] + b1[e]); hidden also holds the
  // partial sums between blocks of k.
  auto hiddenType = MemRefType::get(
      {ShapedType::kDynamic, staticH ? *staticH : ShapedType::kDynamic},
      b.getF32Type());
  SmallVector<Value> hiddenSizes = {maxRows};
  if (hiddenType.isDynamicDim(1))
    hiddenSizes.push_back(h);
  Value hidden = memref::AllocOp::create(b, loc, hiddenType, hiddenSizes,
                                         b.getI64IntegerAttr(64));
  // Plain weights: one block scratch on the stack for both GEMMs.
  Value scratch =
      weights.panelWidth ? Value() : allocaBlockScratch(b, loc, shape);
  // Panels read in place: each GEMM's tile pads fewest of its columns.
  MicrokernelShape upTile = scratch ? shape : tileForColumns(shape, staticH);
  MicrokernelShape downTile =
      scratch ? shape : tileForColumns(shape, staticD);
  // B in panel layout: read in place (no packing), prefetched a panel
  // ahead when the shape asks for it.
  auto panelLoader = [&](Value w) {
    return [w, ex, vectorType](OpBuilder &b, Location loc, Value kk, Value n) {
      return loadPanelVector(b, loc, vectorType, w, ValueRange{ex}, kk, n);
    };
  };
  auto panelPrefetcher = [&](Value w) {
    return [w, ex](OpBuilder &b, Location loc, Value kk, Value n) {
      prefetchPanelVector(b, loc, w, ValueRange{ex}, kk, n);
    };
  };
  GemmAccessors up;
  setPlainOutput(up, hidden, {}, vectorType);
  up.loadA = loadA;
  up.loadB = [&](OpBuilder &b, Location loc, Value kk, Value n, Value mask) {
    return loadVector(b, loc, vectorType, weights.w1, {ex, kk, n}, mask);
  };
  if (weights.panelWidth) {
    up.loadPackedB = panelLoader(weights.w1);
    up.prefetchB = panelPrefetcher(weights.w1);
  }
  up.storeC = [&](OpBuilder &b, Location loc, Value row, Value n, Value acc,
                  Value mask) {
    Value bias = loadVector(b, loc, vectorType, weights.b1, {ex, n}, mask);
    Value v = arith::AddFOp::create(b, loc, acc, bias);
    storeVector(b, loc, buildActivation(b, loc, weights.activation, v),
                hidden, {row, n}, mask);
  };
  emitGemm(b, loc, rows, h, d, staticH, upTile, up, scratch,
           /*parallelThreads=*/Value());

  // GEMM 2: out[r] = hidden[r] . w2[e] + b2[e], partial sums in place.
  GemmAccessors down;
  down.loadA = [&](OpBuilder &b, Location loc, Value row, Value kk) {
    return Value(memref::LoadOp::create(b, loc, hidden, ValueRange{row, kk}));
  };
  down.loadB = [&](OpBuilder &b, Location loc, Value kk, Value n,
                   Value mask) {
    return loadVector(b, loc, vectorType, weights.w2, {ex, kk, n}, mask);
  };
  if (weights.panelWidth) {
    down.loadPackedB = panelLoader(weights.w2);
    down.prefetchB = panelPrefetcher(weights.w2);
  }
  down.initC = up.initC;
  down.loadPartial = [&](OpBuilder &b, Location loc, Value row, Value n,
                         Value mask) {
    return loadVector(b, loc, vectorType, out, outIndices(b, loc, row, n),
                      mask);
  };
  down.storePartial = [&](OpBuilder &b, Location loc, Value row, Value n,
                          Value acc, Value mask) {
    storeVector(b, loc, acc, out, outIndices(b, loc, row, n), mask);
  };
  down.storeC = [&](OpBuilder &b, Location loc, Value row, Value n,
                    Value acc, Value mask) {
    Value bias = loadVector(b, loc, vectorType, weights.b2, {ex, n}, mask);
    storeVector(b, loc, arith::AddFOp::create(b, loc, acc, bias), out,
                outIndices(b, loc, row, n), mask);
  };
  emitGemm(b, loc, rows, d, h, staticD, downTile, down, scratch,
           /*parallelThreads=*/Value());
}

FailureOr<std::optional<int64_t>>
lowering::expertPanelWidth(Operation *op, std::optional<uint64_t> weightPanels,
                           const MicrokernelShape &shape) {
  if (!weightPanels)
    return std::optional<int64_t>();
  auto width = static_cast<int64_t>(*weightPanels);
  if (width % shape.lanes != 0)
    return op->emitOpError() << "weight_panels (" << width
                             << ") must be a multiple of the vector width ("
                             << shape.lanes << ") to be lowered";
  return std::optional<int64_t>(width);
}
