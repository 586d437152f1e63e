//===- GPUMmaGemm.cpp - Tensor-core GEMM kernels (mma.sync) -----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The GEMM of GPUGemm.h on tensor cores with nvvm.mma.sync:
//
//   block: 64 x 64 tile of C, 128 threads = 4 warps; warp w owns rows
//          32 (w / 2) .. +32 and columns 32 (w % 2) .. +32, i.e. 2 x 4 mma
//          tiles of 16 x 8 (32 FP32 accumulators per thread, loop-carried
//          in registers);
//   k loop: A[64 x 16] and B[16 x 64] staged in shared memory as FP32 (8
//          values per thread each, zero outside the matrix), then per 16
//          values of k two m16n8k8 TF32 or one m16n8k16 bf16 mma per tile.
//
// Fragment layout (PTX ISA, "Matrix fragments for mma.m16n8k8/k16"), with
// g = lane / 4 and t = lane % 4:
//   TF32 A a0..a3 = (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4)
//        B b0..b1 = (k = t, n = g), (k = t + 4, n = g)
//   bf16 A reg i = pair (row g + 8 (i % 2), cols 2t + 8 (i / 2) + {0, 1})
//        B reg j = pair (k = 2t + 8 j + {0, 1}, n = g)
//   C    c0..c3 = (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)
// A pair packs its first element in the low 16 bits.
//
// Shared memory: A rows have 20 floats (rows g = 0..7 start in banks 0, 20,
// 8, 28, 16, 4, 24, 12: the 32 TF32 reads of a fragment hit 32 banks; the
// bf16 reads of pairs are 2-way, see mma_model.py); B rows have 72 floats
// for TF32 (k rows t = 0..3 start in banks 0, 8, 16, 24) and 68 for bf16
// (rows 0, 2, 4, 6 in banks 0, 8, 16, 24; 1, 3, 5, 7 in 4, 12, 20, 28).
// Operands are staged as FP32 with plain loads (no ldmatrix, no cp.async:
// a later step) and rounded when the fragments are built.
// python/vmoe_tools/mma_model.py is a lane-exact CPU model of this kernel
// (test/python/mma-model.test checks it against numpy).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Codegen/GPUGemm.h"

#include "GPUGemmStaging.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::vmoe;
using gpugemm::lessThan;

namespace {

constexpr int64_t kTile = 64, kStep = 16, kWarps = 4, kWarpSize = 32;
constexpr int64_t kBlockThreads = kWarps * kWarpSize;
/// mma tiles per warp: 2 (M) x 4 (N) of 16 x 8.
constexpr int64_t kTilesM = 2, kTilesN = 4;
/// Shared-memory row strides (floats), see the file comment.
constexpr int64_t kAStride = 20, kBStrideTF32 = 72, kBStrideBF16 = 68;

Value cst(OpBuilder &b, Location loc, int64_t v) {
  return gpugemm::indexConstant(b, loc, v);
}

Value add(OpBuilder &b, Location loc, Value x, int64_t v) {
  return v == 0 ? x : Value(arith::AddIOp::create(b, loc, x, cst(b, loc, v)));
}

/// The TF32 bits of `x`: round to nearest (ties away from zero) to 10
/// mantissa bits, as cvt.rna.tf32.f32.
Value toTF32(OpBuilder &b, Location loc, Value x) {
  Type i32 = b.getI32Type();
  Value bits = arith::BitcastOp::create(b, loc, i32, x);
  Value rounded = arith::AddIOp::create(
      b, loc, bits, arith::ConstantIntOp::create(b, loc, i32, 0x1000));
  return arith::AndIOp::create(
      b, loc, rounded,
      arith::ConstantIntOp::create(b, loc, i32,
                                   static_cast<int32_t>(0xffffe000u)));
}

/// Two floats as bf16 (round to nearest even) packed in an i32, `low` in the
/// low half.
Value packBF16(OpBuilder &b, Location loc, Value low, Value high) {
  Type i32 = b.getI32Type(), i16 = b.getI16Type(), bf16 = b.getBF16Type();
  auto bits = [&](Value x) -> Value {
    Value h = arith::TruncFOp::create(b, loc, bf16, x);
    Value i = arith::BitcastOp::create(b, loc, i16, h);
    return arith::ExtUIOp::create(b, loc, i32, i);
  };
  Value hi = arith::ShLIOp::create(
      b, loc, bits(high), arith::ConstantIntOp::create(b, loc, i32, 16));
  return arith::OrIOp::create(b, loc, hi, bits(low));
}

} // namespace

std::optional<GPUMma> mlir::vmoe::parseGPUMma(llvm::StringRef name) {
  if (name == "none")
    return GPUMma::None;
  if (name == "tf32")
    return GPUMma::TF32;
  if (name == "bf16")
    return GPUMma::BF16;
  return std::nullopt;
}

void mlir::vmoe::emitGPUMmaGemm(OpBuilder &b, Location loc, Value batches,
                                Value m, Value n, Value k,
                                const GPUGemmAccessors &access, GPUMma mma) {
  assert(mma != GPUMma::None && "the SIMT kernel is emitGPUGemm");
  bool tf32 = mma == GPUMma::TF32;
  int64_t bStride = tf32 ? kBStrideTF32 : kBStrideBF16;
  Value tile = cst(b, loc, kTile), one = cst(b, loc, 1);
  gpugemm::GemmGrid grid = gpugemm::gemmGrid(b, loc, kTile, batches, m, n);
  auto shared = gpu::AddressSpaceAttr::get(b.getContext(),
                                           gpu::AddressSpace::Workgroup);
  auto aTileType =
      MemRefType::get({kTile, kAStride}, b.getF32Type(), AffineMap(), shared);
  auto bTileType =
      MemRefType::get({kStep, bStride}, b.getF32Type(), AffineMap(), shared);
  auto launch = gpu::LaunchOp::create(
      b, loc, grid.x, grid.y, grid.z, cst(b, loc, kBlockThreads), one, one,
      /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
      /*asyncDependencies=*/{}, TypeRange{aTileType, bTileType});

  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value aTile = launch.getWorkgroupAttributions()[0];
  Value bTile = launch.getWorkgroupAttributions()[1];
  Value colBase = arith::MulIOp::create(b, loc, launch.getBlockIds().x, tile);
  Value tid = launch.getThreadIds().x;
  Value warp = arith::DivUIOp::create(b, loc, tid, cst(b, loc, kWarpSize));
  Value lane = arith::RemUIOp::create(b, loc, tid, cst(b, loc, kWarpSize));
  Value g = arith::DivUIOp::create(b, loc, lane, cst(b, loc, 4));
  Value t = arith::RemUIOp::create(b, loc, lane, cst(b, loc, 4));
  Value warpRow = arith::MulIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, warp, cst(b, loc, 2)),
      cst(b, loc, 32));
  Value warpCol = arith::MulIOp::create(
      b, loc, arith::RemUIOp::create(b, loc, warp, cst(b, loc, 2)),
      cst(b, loc, 32));
  Value t2 = arith::MulIOp::create(b, loc, t, cst(b, loc, 2));

  // Grid y and z are capped at 65,535: the rest of the row tiles and batch
  // entries loop.
  gpugemm::TileLoops tiles =
      gpugemm::openTileLoops(b, loc, launch, kTile, batches, m);
  Value batch = tiles.batch, rowBase = tiles.rowBase;
  Value rows = access.rowCount(b, loc, batch);

  // Blocks past the filled rows of their batch entry do nothing (uniform in
  // the block: the barriers inside are safe).
  scf::IfOp::create(b, loc, lessThan(b, loc, rowBase, rows),
                    [&](OpBuilder &b, Location loc) {
    // Accumulator e of mma tile (mi, ni) holds C[row, col] of the epilogue.
    auto rowOf = [&](OpBuilder &b, Location loc, int64_t mi, int64_t e) {
      return Value(arith::AddIOp::create(
          b, loc, rowBase,
          arith::AddIOp::create(
              b, loc, add(b, loc, warpRow, mi * 16 + 8 * (e / 2)), g)));
    };
    auto colOf = [&](OpBuilder &b, Location loc, int64_t ni, int64_t e) {
      return Value(arith::AddIOp::create(
          b, loc, colBase,
          arith::AddIOp::create(b, loc, add(b, loc, warpCol, ni * 8 + e % 2),
                                t2)));
    };
    SmallVector<Value> init;
    for (int64_t mi = 0; mi < kTilesM; ++mi)
      for (int64_t ni = 0; ni < kTilesN; ++ni)
        for (int64_t e = 0; e < 4; ++e)
          init.push_back(gpugemm::initialAccumulator(
              b, loc, access, batch, rowOf(b, loc, mi, e),
              colOf(b, loc, ni, e), rows, n));
    auto stages = scf::ForOp::create(
        b, loc, cst(b, loc, 0), k, cst(b, loc, kStep), init,
        [&](OpBuilder &b, Location loc, Value k0, ValueRange acc) {
          // Stage A[rowBase .. +64, k0 .. +16] and B[k0 .. +16, colBase ..
          // +64], 8 values of each per thread, along the contiguous dim of
          // each operand (coalesced).
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

          auto loadA = [&](int64_t mi, int64_t dr, Value col) -> Value {
            Value r = add(b, loc, warpRow, mi * 16 + dr);
            r = arith::AddIOp::create(b, loc, r, g);
            return memref::LoadOp::create(b, loc, aTile, ValueRange{r, col});
          };
          auto loadB = [&](int64_t ni, Value kk) -> Value {
            Value c = add(b, loc, warpCol, ni * 8);
            c = arith::AddIOp::create(b, loc, c, g);
            return memref::LoadOp::create(b, loc, bTile, ValueRange{kk, c});
          };
          SmallVector<Value> next(acc.begin(), acc.end());
          Type f32 = b.getF32Type();
          auto resultType = LLVM::LLVMStructType::getLiteral(
              b.getContext(), {f32, f32, f32, f32});
          // One k step of 8 (TF32) or 16 (bf16) values at offset ks.
          for (int64_t ks = 0; ks < kStep; ks += tf32 ? 8 : 16) {
            SmallVector<SmallVector<Value, 4>> aFrags, bFrags;
            for (int64_t mi = 0; mi < kTilesM; ++mi) {
              SmallVector<Value, 4> frag;
              if (tf32) {
                Value c0 = add(b, loc, t, ks), c4 = add(b, loc, t, ks + 4);
                frag = {toTF32(b, loc, loadA(mi, 0, c0)),
                        toTF32(b, loc, loadA(mi, 8, c0)),
                        toTF32(b, loc, loadA(mi, 0, c4)),
                        toTF32(b, loc, loadA(mi, 8, c4))};
              } else {
                for (int64_t i = 0; i < 4; ++i) {
                  Value c = add(b, loc, t2, ks + 8 * (i / 2));
                  int64_t dr = 8 * (i % 2);
                  frag.push_back(packBF16(b, loc, loadA(mi, dr, c),
                                          loadA(mi, dr, add(b, loc, c, 1))));
                }
              }
              aFrags.push_back(frag);
            }
            for (int64_t ni = 0; ni < kTilesN; ++ni) {
              SmallVector<Value, 4> frag;
              if (tf32) {
                frag = {toTF32(b, loc, loadB(ni, add(b, loc, t, ks))),
                        toTF32(b, loc, loadB(ni, add(b, loc, t, ks + 4)))};
              } else {
                for (int64_t j = 0; j < 2; ++j) {
                  Value kk = add(b, loc, t2, ks + 8 * j);
                  frag.push_back(packBF16(b, loc, loadB(ni, kk),
                                          loadB(ni, add(b, loc, kk, 1))));
                }
              }
              bFrags.push_back(frag);
            }
            for (int64_t mi = 0; mi < kTilesM; ++mi) {
              for (int64_t ni = 0; ni < kTilesN; ++ni) {
                int64_t base = (mi * kTilesN + ni) * 4;
                SmallVector<Value> c(next.begin() + base,
                                     next.begin() + base + 4);
                auto type = tf32 ? NVVM::MMATypes::tf32 : NVVM::MMATypes::bf16;
                Value d = NVVM::MmaOp::create(
                    b, loc, resultType, aFrags[mi], bFrags[ni],
                    c,
                    ArrayRef<int64_t>{16, 8, tf32 ? 8 : 16},
                    /*b1Op=*/std::nullopt, /*intOverflow=*/std::nullopt,
                    std::array<NVVM::MMATypes, 2>{type, type},
                    std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                                   NVVM::MMALayout::col});
                for (int64_t e = 0; e < 4; ++e)
                  next[base + e] = LLVM::ExtractValueOp::create(
                      b, loc, d, ArrayRef<int64_t>{e});
              }
            }
          }
          gpu::BarrierOp::create(b, loc);
          scf::YieldOp::create(b, loc, next);
        });
    for (int64_t mi = 0; mi < kTilesM; ++mi) {
      for (int64_t ni = 0; ni < kTilesN; ++ni) {
        for (int64_t e = 0; e < 4; ++e) {
          Value row = rowOf(b, loc, mi, e), col = colOf(b, loc, ni, e);
          Value inside = arith::AndIOp::create(
              b, loc, lessThan(b, loc, row, rows), lessThan(b, loc, col, n));
          scf::IfOp::create(b, loc, inside, [&](OpBuilder &b, Location loc) {
            access.storeC(b, loc, batch, row, col,
                          stages.getResult((mi * kTilesN + ni) * 4 + e));
            scf::YieldOp::create(b, loc);
          });
        }
      }
    }
    scf::YieldOp::create(b, loc);
  });
  b.setInsertionPointAfter(tiles.outer);
  gpu::TerminatorOp::create(b, loc);
}
