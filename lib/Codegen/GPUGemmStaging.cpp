//===- GPUGemmStaging.cpp - Shared parts of the GPU GEMM kernels -*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "GPUGemmStaging.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::vmoe;

Value mlir::vmoe::loadElement(OpBuilder &b, Location loc,
                              const MemRefElement &element) {
  return memref::LoadOp::create(b, loc, element.memref, element.indices);
}

Value gpugemm::indexConstant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value gpugemm::lessThan(OpBuilder &b, Location loc, Value a, Value c) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, a, c);
}

void gpugemm::stageTile(OpBuilder &b, Location loc, Value tid, int64_t threads,
                       Value tile, int64_t rows, int64_t cols,
                       bool colsFastest, Value rowBase, Value colBase,
                       Value rowLimit, Value colLimit, TileElementFn element) {
  assert((rows * cols) % threads == 0 && "tile must split over the threads");
  Value one = indexConstant(b, loc, 1);
  Value lastRow = arith::SubIOp::create(b, loc, rowLimit, one);
  Value lastCol = arith::SubIOp::create(b, loc, colLimit, one);
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  Value fast = indexConstant(b, loc, colsFastest ? cols : rows);
  for (int64_t l = 0; l < rows * cols / threads; ++l) {
    Value idx = arith::AddIOp::create(b, loc, tid,
                                      indexConstant(b, loc, l * threads));
    Value minor = arith::RemUIOp::create(b, loc, idx, fast);
    Value major = arith::DivUIOp::create(b, loc, idx, fast);
    Value r = colsFastest ? major : minor, c = colsFastest ? minor : major;
    Value row = arith::AddIOp::create(b, loc, rowBase, r);
    Value col = arith::AddIOp::create(b, loc, colBase, c);
    Value ok = arith::AndIOp::create(b, loc, lessThan(b, loc, row, rowLimit),
                                     lessThan(b, loc, col, colLimit));
    Value v = loadElement(
        b, loc,
        element(b, loc, arith::MinSIOp::create(b, loc, row, lastRow),
                arith::MinSIOp::create(b, loc, col, lastCol)));
    memref::StoreOp::create(b, loc,
                            arith::SelectOp::create(b, loc, ok, v, zero),
                            tile, ValueRange{r, c});
  }
}

Value gpugemm::initialAccumulator(OpBuilder &b, Location loc,
                                 const GPUGemmAccessors &access, Value batch,
                                 Value row, Value col, Value rows, Value n) {
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  if (!access.initC)
    return zero;
  Value one = indexConstant(b, loc, 1);
  Value inside = arith::AndIOp::create(b, loc, lessThan(b, loc, row, rows),
                                       lessThan(b, loc, col, n));
  Value v = access.initC(
      b, loc, batch,
      arith::MinSIOp::create(b, loc, row,
                             arith::SubIOp::create(b, loc, rows, one)),
      arith::MinSIOp::create(b, loc, col,
                             arith::SubIOp::create(b, loc, n, one)));
  return arith::SelectOp::create(b, loc, inside, v, zero);
}

gpugemm::GemmGrid gpugemm::gemmGrid(OpBuilder &b, Location loc, int64_t tile,
                                  Value batches, Value m, Value n) {
  Value one = indexConstant(b, loc, 1), limit = indexConstant(b, loc,
                                                              kMaxGridYZ);
  Value tileSize = indexConstant(b, loc, tile);
  auto capped = [&](Value count) -> Value {
    return arith::MinSIOp::create(
        b, loc, arith::MaxSIOp::create(b, loc, count, one), limit);
  };
  Value x = arith::MaxSIOp::create(
      b, loc, arith::CeilDivSIOp::create(b, loc, n, tileSize), one);
  return {x, capped(arith::CeilDivSIOp::create(b, loc, m, tileSize)),
          capped(batches)};
}

gpugemm::TileLoops gpugemm::openTileLoops(OpBuilder &b, Location loc,
                                        gpu::LaunchOp launch, int64_t tile,
                                        Value batches, Value m) {
  Value tileSize = indexConstant(b, loc, tile);
  auto batchLoop = scf::ForOp::create(b, loc, launch.getBlockIds().z, batches,
                                      launch.getGridSize().z);
  b.setInsertionPointToStart(batchLoop.getBody());
  auto rowLoop = scf::ForOp::create(
      b, loc, arith::MulIOp::create(b, loc, launch.getBlockIds().y, tileSize),
      m, arith::MulIOp::create(b, loc, launch.getGridSize().y, tileSize));
  b.setInsertionPointToStart(rowLoop.getBody());
  return {batchLoop.getInductionVar(), rowLoop.getInductionVar(), batchLoop};
}
