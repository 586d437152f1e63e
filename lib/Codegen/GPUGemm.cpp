//===- GPUGemm.cpp - Tiled shared-memory GEMM kernels -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Codegen/GPUGemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::vmoe;

namespace {

/// Tile geometry: 64 x 64 outputs per block, 16 x 16 threads, 4 x 4 per
/// thread, 16 values of k per shared-memory stage. Thread (ty, tx) owns rows
/// ty + 16 i and columns tx + 16 j of the tile: a warp (two values of ty)
/// reads 16 consecutive B columns (16 banks; the other ty reads the same
/// ones, a broadcast) and two A rows 16 floats apart (two banks, each a
/// broadcast), so the shared-memory reads have no bank conflicts, and the
/// stores of C are coalesced along rows.
constexpr int64_t kTile = 64, kThreads = 16, kMicro = 4, kStep = 16;
constexpr int64_t kBlockThreads = kThreads * kThreads;
/// Largest grid z of a launch.
constexpr int64_t kMaxGridZ = 65535;

Value cst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// `v` if `ok`, else 0.0 (loaded from a clamped, always valid index).
Value zeroUnless(OpBuilder &b, Location loc, Value ok, Value v) {
  return arith::SelectOp::create(
      b, loc, ok, v, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0)));
}

Value lessThan(OpBuilder &b, Location loc, Value a, Value c) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, a, c);
}

} // namespace

void mlir::vmoe::emitGPUGemm(OpBuilder &b, Location loc, Value batches,
                             Value m, Value n, Value k,
                             const GPUGemmAccessors &access) {
  Value tile = cst(b, loc, kTile);
  Value gridX = arith::CeilDivSIOp::create(b, loc, n, tile);
  Value gridY = arith::CeilDivSIOp::create(b, loc, m, tile);
  Value threads = cst(b, loc, kThreads), one = cst(b, loc, 1);
  auto shared = gpu::AddressSpaceAttr::get(b.getContext(),
                                           gpu::AddressSpace::Workgroup);
  auto aTileType =
      MemRefType::get({kTile, kStep}, b.getF32Type(), AffineMap(), shared);
  auto bTileType =
      MemRefType::get({kStep, kTile}, b.getF32Type(), AffineMap(), shared);
  // Grid z is limited to 65,535: larger batch counts loop.
  Value gridZ = arith::MinSIOp::create(
      b, loc, arith::MaxSIOp::create(b, loc, batches, one),
      cst(b, loc, kMaxGridZ));
  auto launch = gpu::LaunchOp::create(
      b, loc, gridX, gridY, gridZ, threads, threads, one,
      /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
      /*asyncDependencies=*/{}, TypeRange{aTileType, bTileType});

  OpBuilder::InsertionGuard guard(b);
  Block &body = launch.getBody().front();
  b.setInsertionPointToStart(&body);
  Value aTile = launch.getWorkgroupAttributions()[0];
  Value bTile = launch.getWorkgroupAttributions()[1];
  Value colBase = arith::MulIOp::create(b, loc, launch.getBlockIds().x, tile);
  Value rowBase = arith::MulIOp::create(b, loc, launch.getBlockIds().y, tile);
  Value tx = launch.getThreadIds().x, ty = launch.getThreadIds().y;
  Value tid = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, ty, threads), tx);
  auto batchLoop = scf::ForOp::create(b, loc, launch.getBlockIds().z, batches,
                                      launch.getGridSize().z);
  b.setInsertionPointToStart(batchLoop.getBody());
  Value batch = batchLoop.getInductionVar();
  Value rows = access.rowCount(b, loc, batch);

  // Blocks past the filled rows of their batch entry do nothing (the
  // condition is uniform in the block, so the barriers inside are safe).
  scf::IfOp::create(b, loc, lessThan(b, loc, rowBase, rows),
                    [&](OpBuilder &b, Location loc) {
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
    Value lastRow = arith::SubIOp::create(b, loc, rows, one);
    Value lastK = arith::SubIOp::create(b, loc, k, one);
    Value lastCol = arith::SubIOp::create(b, loc, n, one);
    SmallVector<Value> init(kMicro * kMicro, zero);
    auto stages = scf::ForOp::create(
        b, loc, cst(b, loc, 0), k, cst(b, loc, kStep), init,
        [&](OpBuilder &b, Location loc, Value k0, ValueRange acc) {
          // Stage A[rowBase .. +64, k0 .. +16] and B[k0 .. +16, colBase ..
          // +64]: 1024 values each, 4 per thread.
          for (int64_t l = 0; l < kTile * kStep / kBlockThreads; ++l) {
            Value idx = arith::AddIOp::create(
                b, loc, tid, cst(b, loc, l * kBlockThreads));
            Value r = arith::DivUIOp::create(b, loc, idx, cst(b, loc, kStep));
            Value c = arith::RemUIOp::create(b, loc, idx, cst(b, loc, kStep));
            Value row = arith::AddIOp::create(b, loc, rowBase, r);
            Value kk = arith::AddIOp::create(b, loc, k0, c);
            Value ok = arith::AndIOp::create(b, loc, lessThan(b, loc, row, rows),
                                             lessThan(b, loc, kk, k));
            Value v = access.loadA(
                b, loc, batch, arith::MinSIOp::create(b, loc, row, lastRow),
                arith::MinSIOp::create(b, loc, kk, lastK));
            memref::StoreOp::create(b, loc, zeroUnless(b, loc, ok, v), aTile,
                                    ValueRange{r, c});

            Value br = arith::DivUIOp::create(b, loc, idx, tile);
            Value bc = arith::RemUIOp::create(b, loc, idx, tile);
            Value bk = arith::AddIOp::create(b, loc, k0, br);
            Value col = arith::AddIOp::create(b, loc, colBase, bc);
            Value bOk = arith::AndIOp::create(
                b, loc, lessThan(b, loc, bk, k), lessThan(b, loc, col, n));
            Value w = access.loadB(
                b, loc, batch, arith::MinSIOp::create(b, loc, bk, lastK),
                arith::MinSIOp::create(b, loc, col, lastCol));
            memref::StoreOp::create(b, loc, zeroUnless(b, loc, bOk, w), bTile,
                                    ValueRange{br, bc});
          }
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
  b.setInsertionPointAfter(batchLoop);
  gpu::TerminatorOp::create(b, loc);
}
