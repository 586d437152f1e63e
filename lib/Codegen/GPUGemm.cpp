//===- GPUGemm.cpp - Tiled shared-memory GEMM kernels -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Codegen/GPUGemm.h"

#include "GPUGemmStaging.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::vmoe;
using gpugemm::lessThan;

namespace {

/// Tile geometry: 64 x 64 outputs per block, 16 x 16 threads, 4 x 4 per
/// thread, 16 values of k per shared-memory stage. Thread (ty, tx) owns rows
/// ty + 16 i and columns tx + 16 j of the tile: a warp (two values of ty)
/// reads 16 consecutive B columns (16 banks; the other ty reads the same
/// ones, a broadcast) and two A rows (two banks, each a broadcast), so the
/// shared-memory reads have no bank conflicts, and the stores of C are
/// coalesced along rows. A tile staged along its rows (A row-contiguous)
/// has rows of 17 floats and a B tile staged along k rows of 65, so that
/// the column-wise stores of the staging hit distinct banks.
constexpr int64_t kTile = 64, kThreads = 16, kMicro = 4, kStep = 16;
constexpr int64_t kBlockThreads = kThreads * kThreads;

Value cst(OpBuilder &b, Location loc, int64_t v) {
  return gpugemm::indexConstant(b, loc, v);
}

} // namespace

void mlir::vmoe::emitGPUGemm(OpBuilder &b, Location loc, Value batches,
                             Value m, Value n, Value k,
                             const GPUGemmAccessors &access) {
  Value tile = cst(b, loc, kTile);
  gpugemm::GemmGrid grid = gpugemm::gemmGrid(b, loc, kTile, batches, m, n);
  Value threads = cst(b, loc, kThreads), one = cst(b, loc, 1);
  auto shared = gpu::AddressSpaceAttr::get(b.getContext(),
                                           gpu::AddressSpace::Workgroup);
  int64_t aStride = access.aKContiguous ? kStep : kStep + 1;
  int64_t bStride = access.bKContiguous ? kTile + 1 : kTile;
  auto aTileType =
      MemRefType::get({kTile, aStride}, b.getF32Type(), AffineMap(), shared);
  auto bTileType =
      MemRefType::get({kStep, bStride}, b.getF32Type(), AffineMap(), shared);
  auto launch = gpu::LaunchOp::create(
      b, loc, grid.x, grid.y, grid.z, threads, threads, one,
      /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
      /*asyncDependencies=*/{}, TypeRange{aTileType, bTileType});

  OpBuilder::InsertionGuard guard(b);
  Block &body = launch.getBody().front();
  b.setInsertionPointToStart(&body);
  Value aTile = launch.getWorkgroupAttributions()[0];
  Value bTile = launch.getWorkgroupAttributions()[1];
  Value colBase = arith::MulIOp::create(b, loc, launch.getBlockIds().x, tile);
  Value tx = launch.getThreadIds().x, ty = launch.getThreadIds().y;
  Value tid = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, ty, threads), tx);
  // Grid y and z are capped at 65,535: the rest of the row tiles and batch
  // entries loop.
  gpugemm::TileLoops tiles =
      gpugemm::openTileLoops(b, loc, launch, kTile, batches, m);
  Value batch = tiles.batch, rowBase = tiles.rowBase;
  Value rows = access.rowCount(b, loc, batch);

  // Blocks past the filled rows of their batch entry do nothing (the
  // condition is uniform in the block, so the barriers inside are safe).
  scf::IfOp::create(b, loc, lessThan(b, loc, rowBase, rows),
                    [&](OpBuilder &b, Location loc) {
    SmallVector<Value> init;
    for (int64_t i = 0; i < kMicro; ++i)
      for (int64_t j = 0; j < kMicro; ++j)
        init.push_back(gpugemm::initialAccumulator(
            b, loc, access, batch,
            arith::AddIOp::create(
                b, loc, rowBase,
                arith::AddIOp::create(b, loc, ty, cst(b, loc, i * kThreads))),
            arith::AddIOp::create(
                b, loc, colBase,
                arith::AddIOp::create(b, loc, tx, cst(b, loc, j * kThreads))),
            rows, n));
    auto stages = scf::ForOp::create(
        b, loc, cst(b, loc, 0), k, cst(b, loc, kStep), init,
        [&](OpBuilder &b, Location loc, Value k0, ValueRange acc) {
          // Stage A[rowBase .. +64, k0 .. +16] and B[k0 .. +16, colBase ..
          // +64]: 1024 values each, 4 per thread.
          gpugemm::stageTile(b, loc, tid, kBlockThreads, aTile, kTile, kStep,
                            access.aKContiguous, rowBase, k0, rows, k,
                            [&](OpBuilder &b, Location loc, Value r,
                                Value c) {
                              return access.elementA(b, loc, batch, r, c);
                            });
          gpugemm::stageTile(b, loc, tid, kBlockThreads, bTile, kStep, kTile,
                            !access.bKContiguous, k0, colBase, k, n,
                            [&](OpBuilder &b, Location loc, Value r,
                                Value c) {
                              return access.elementB(b, loc, batch, r, c);
                            });
          gpu::BarrierOp::create(b, loc);
          auto inner = scf::ForOp::create(
              b, loc, cst(b, loc, 0), cst(b, loc, kStep), one, acc,
              [&](OpBuilder &b, Location loc, Value kk, ValueRange acc) {
                SmallVector<Value> as, bs;
                for (int64_t i = 0; i < kMicro; ++i) {
                  Value r = arith::AddIOp::create(b, loc, ty,
                                                  cst(b, loc, i * kThreads));
                  as.push_back(
                      memref::LoadOp::create(b, loc, aTile, ValueRange{r, kk}));
                  Value c = arith::AddIOp::create(b, loc, tx,
                                                  cst(b, loc, i * kThreads));
                  bs.push_back(
                      memref::LoadOp::create(b, loc, bTile, ValueRange{kk, c}));
                }
                SmallVector<Value> next;
                for (int64_t i = 0; i < kMicro; ++i)
                  for (int64_t j = 0; j < kMicro; ++j)
                    next.push_back(math::FmaOp::create(
                        b, loc, as[i], bs[j], acc[i * kMicro + j]));
                scf::YieldOp::create(b, loc, next);
              });
          gpu::BarrierOp::create(b, loc);
          scf::YieldOp::create(b, loc, inner.getResults());
        });
    for (int64_t i = 0; i < kMicro; ++i) {
      for (int64_t j = 0; j < kMicro; ++j) {
        Value row = arith::AddIOp::create(
            b, loc, rowBase,
            arith::AddIOp::create(b, loc, ty, cst(b, loc, i * kThreads)));
        Value col = arith::AddIOp::create(
            b, loc, colBase,
            arith::AddIOp::create(b, loc, tx, cst(b, loc, j * kThreads)));
        Value inside = arith::AndIOp::create(
            b, loc, lessThan(b, loc, row, rows), lessThan(b, loc, col, n));
        scf::IfOp::create(b, loc, inside, [&](OpBuilder &b, Location loc) {
          access.storeC(b, loc, batch, row, col,
                        stages.getResult(i * kMicro + j));
          scf::YieldOp::create(b, loc);
        });
      }
    }
    scf::YieldOp::create(b, loc);
  });
  b.setInsertionPointAfter(tiles.outer);
  gpu::TerminatorOp::create(b, loc);
}
