//===- PanelLayout.cpp - Weights stored as GEMM column panels ---*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Codegen/PanelLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/AffineExpr.h"

using namespace mlir;
using namespace mlir::vmoe;

/// The panel map of `plain`, with k or its pair index k floordiv 2.
static AffineMap panelMap(AffineMap plain, int64_t width, bool pairs) {
  ArrayRef<AffineExpr> results = plain.getResults();
  assert(results.size() >= 2 && width > 0 && "a matrix operand");
  SmallVector<AffineExpr> panel(results.drop_back(2));
  AffineExpr k = results[results.size() - 2], n = results.back();
  panel.push_back(n.floorDiv(width));
  panel.push_back(pairs ? k.floorDiv(2) : k);
  panel.push_back(n % width);
  return AffineMap::get(plain.getNumDims(), plain.getNumSymbols(), panel,
                        plain.getContext());
}

AffineMap mlir::vmoe::getPanelOperandMap(AffineMap plain, int64_t width) {
  return panelMap(plain, width, /*pairs=*/false);
}

AffineMap mlir::vmoe::getPairPanelOperandMap(AffineMap plain, int64_t width) {
  return panelMap(plain, width, /*pairs=*/true);
}

std::optional<PanelOperandMap>
mlir::vmoe::matchPanelOperandMap(AffineMap map) {
  ArrayRef<AffineExpr> results = map.getResults();
  if (results.size() < 3)
    return std::nullopt;
  auto div = dyn_cast<AffineBinaryOpExpr>(results[results.size() - 3]);
  auto mod = dyn_cast<AffineBinaryOpExpr>(results.back());
  // k, or k floordiv 2 for bf16 pair panels.
  AffineExpr middle = results[results.size() - 2];
  auto half = dyn_cast<AffineBinaryOpExpr>(middle);
  bool pairs = half && half.getKind() == AffineExprKind::FloorDiv &&
               half.getRHS() == getAffineConstantExpr(2, map.getContext());
  auto k = dyn_cast<AffineDimExpr>(pairs ? half.getLHS() : middle);
  if (!div || !mod || !k || div.getKind() != AffineExprKind::FloorDiv ||
      mod.getKind() != AffineExprKind::Mod)
    return std::nullopt;
  auto n = dyn_cast<AffineDimExpr>(div.getLHS());
  auto width = dyn_cast<AffineConstantExpr>(div.getRHS());
  if (!n || !width || width.getValue() <= 0 || mod.getLHS() != n ||
      mod.getRHS() != width)
    return std::nullopt;
  SmallVector<AffineExpr> plain(results.drop_back(3));
  plain.push_back(k);
  plain.push_back(n);
  return PanelOperandMap{AffineMap::get(map.getNumDims(), map.getNumSymbols(),
                                        plain, map.getContext()),
                         width.getValue(), pairs};
}

/// The indices of B[lead..., k, n] in the panels [lead..., P, K, L]
/// (columns past the last panel: the last panel).
static SmallVector<Value> panelIndices(OpBuilder &b, Location loc,
                                       Value panels, ValueRange lead, Value k,
                                       Value n) {
  auto panelsType = cast<MemRefType>(panels.getType());
  int64_t rank = panelsType.getRank();
  int64_t width = panelsType.getShape().back();
  assert(!ShapedType::isDynamic(width) && "a static panel width");
  Value widthValue = arith::ConstantIndexOp::create(b, loc, width);
  Value lastPanel = arith::SubIOp::create(
      b, loc, memref::DimOp::create(b, loc, panels, rank - 3),
      arith::ConstantIndexOp::create(b, loc, 1));
  Value panel = arith::MinSIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, n, widthValue), lastPanel);
  Value lane = arith::RemUIOp::create(b, loc, n, widthValue);
  SmallVector<Value> indices(lead);
  indices.append({panel, k, lane});
  return indices;
}

Value mlir::vmoe::loadPanelVector(OpBuilder &b, Location loc, VectorType type,
                                  Value panels, ValueRange lead, Value k,
                                  Value n) {
  return vector::LoadOp::create(b, loc, type, panels,
                                panelIndices(b, loc, panels, lead, k, n));
}

void mlir::vmoe::prefetchPanelVector(OpBuilder &b, Location loc, Value panels,
                                     ValueRange lead, Value k, Value n) {
  memref::PrefetchOp::create(b, loc, panels,
                             panelIndices(b, loc, panels, lead, k, n),
                             /*isWrite=*/false, /*localityHint=*/2,
                             /*isDataCache=*/true);
}

Value mlir::vmoe::loadPairPanelWords(OpBuilder &b, Location loc, int64_t lanes,
                                     Value panels, ValueRange lead, Value pair,
                                     Value n) {
  auto wordsType = VectorType::get({lanes}, b.getI32Type());
  Type element = cast<MemRefType>(panels.getType()).getElementType();
  if (element.isInteger(32))
    return loadPanelVector(b, loc, wordsType, panels, lead, pair, n);
  Value words = loadPanelVector(b, loc, VectorType::get({lanes}, element),
                                panels, lead, pair, n);
  return vector::BitCastOp::create(b, loc, wordsType, words);
}
