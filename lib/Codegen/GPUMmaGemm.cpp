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
//   k loop: A[64 x 32] and B[32 x 64] k tiles copied global -> shared with
//          cp.async (nvgpu.device_async_copy: 16-byte chunks where the
//          operand's layout allows, else 4-byte copies; zero-filled past the
//          edges) into a ring of 3 stages: while tile kt is multiplied, tiles
//          kt + 1 and kt + 2 are in flight (one wait_group and one barrier
//          per k tile); per 32 values of k, four m16n8k8 TF32 or two
//          m16n8k16 bf16 mma per mma tile.
//
// Fragment layout (PTX ISA, "Matrix fragments for mma.m16n8k8/k16"), with
// g = lane / 4 and t = lane % 4:
//   TF32 A a0..a3 = (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4): one
//        ldmatrix.x4 per mma tile and 8 values of k (an 8 x 4 block of f32
//        is an 8 x 8 block of b16: lane l gets word l % 4 of row l / 4);
//        B b0..b1 = (k = t, n = g), (k = t + 4, n = g)
//   bf16 A reg i = pair (row g + 8 (i % 2), cols 2t + 8 (i / 2) + {0, 1}):
//        one 64-bit shared load per pair;
//        B reg j = pair (k = 2t + 8 j + {0, 1}, n = g)
//   C    c0..c3 = (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)
// A pair packs its first element in the low 16 bits. Operands are staged as
// FP32 and rounded when the fragments are built (TF32: nearest, ties away;
// bf16: nearest even).
//
// Shared memory, no padding: 16-byte chunk c of a staged row r is stored at
// chunk c ^ s(r) (XOR swizzle), with s chosen so that each fragment read
// hits 32 distinct banks (python/vmoe_tools/mma_model.py counts them):
//   A rows (32 floats = 8 chunks = all 32 banks): TF32 s(r) = r % 8 (the 8
//     rows of an ldmatrix matrix, same logical chunk, land in 8 chunk
//     positions); bf16 s(r) = 2 (r % 4) (a half-warp reads 4 rows x 2
//     chunks);
//   B rows (64 floats): TF32 s(k) = 2 (k % 4) (4 consecutive k rows x 2
//     chunks); bf16 s(k) = 2 ((k / 2) % 4) (rows 2t + {0, 1}).
// 3 stages x (64 x 32 + 32 x 64) floats = 48 KiB of static shared memory.
//
// Epilogue: the accumulators go through a 64 x 72 tile in the A stages, so
// that C is stored a row of 4 columns per thread (coalesced, the caller's
// per-row work done once per 4 columns).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Codegen/GPUGemm.h"

#include "GPUGemmStaging.h"

#include "vmoe/Support/OptionChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::vmoe;
using gpugemm::lessThan;

namespace {

constexpr int64_t kTile = 64, kStep = 32, kStages = 3, kLanes = 32;
constexpr int64_t kBlockThreads = 4 * kLanes;
/// mma tiles per warp: 2 (M) x 4 (N) of 16 x 8.
constexpr int64_t kTilesM = 2, kTilesN = 4;
/// Row stride (floats) of the C tile of the epilogue.
constexpr int64_t kCStride = 72;
static_assert(kTile * kCStride <= kStages * kTile * kStep,
              "the C tile reuses the A stages");

Value cst(OpBuilder &b, Location loc, int64_t v) {
  return gpugemm::indexConstant(b, loc, v);
}

Value add(OpBuilder &b, Location loc, Value x, int64_t v) {
  return v == 0 ? x : Value(arith::AddIOp::create(b, loc, x, cst(b, loc, v)));
}

/// x % m or x / m for a power of two m (index).
Value rem(OpBuilder &b, Location loc, Value x, int64_t m) {
  return arith::RemUIOp::create(b, loc, x, cst(b, loc, m));
}
Value div(OpBuilder &b, Location loc, Value x, int64_t m) {
  return arith::DivUIOp::create(b, loc, x, cst(b, loc, m));
}

/// The TF32 bits of the f32 bits `bits` (i32): round to nearest (ties away
/// from zero) to 10 mantissa bits, as cvt.rna.tf32.f32.
Value toTF32(OpBuilder &b, Location loc, Value bits) {
  Type i32 = b.getI32Type();
  Value rounded = arith::AddIOp::create(
      b, loc, bits, arith::ConstantIntOp::create(b, loc, i32, 0x1000));
  return arith::AndIOp::create(
      b, loc, rounded,
      arith::ConstantIntOp::create(b, loc, i32,
                                   static_cast<int32_t>(0xffffe000u)));
}

Value toTF32F(OpBuilder &b, Location loc, Value x) {
  return toTF32(b, loc,
                arith::BitcastOp::create(b, loc, b.getI32Type(), x));
}

/// A vector<2xf32> as two bf16 (round to nearest even) packed in an i32,
/// element 0 in the low half (cvt.rn.bf16x2.f32).
Value packBF16(OpBuilder &b, Location loc, Value pair) {
  Value halves = arith::TruncFOp::create(
      b, loc, VectorType::get({2}, b.getBF16Type()), pair);
  Value word = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), halves);
  return vector::ExtractOp::create(b, loc, word, 0);
}

Value packBF16(OpBuilder &b, Location loc, Value low, Value high) {
  return packBF16(b, loc,
                  vector::FromElementsOp::create(
                      b, loc, VectorType::get({2}, b.getF32Type()),
                      ValueRange{low, high}));
}

/// `memory` (a shared f32 buffer of at least rows * stride elements) viewed
/// as a rows x stride tile.
Value sharedTileView(OpBuilder &b, Location loc, Value memory, int64_t rows,
                     int64_t stride) {
  auto type = cast<MemRefType>(memory.getType());
  ReassociationIndices all;
  for (int64_t i = 0; i < type.getRank(); ++i)
    all.push_back(i);
  Value flat = memref::CollapseShapeOp::create(
      b, loc, memory, ArrayRef<ReassociationIndices>{all});
  Value part = memref::SubViewOp::create(
      b, loc, flat, ArrayRef<int64_t>{0}, ArrayRef<int64_t>{rows * stride},
      ArrayRef<int64_t>{1});
  auto partType = cast<MemRefType>(part.getType());
  auto tileType = MemRefType::get({rows, stride}, partType.getElementType(),
                                  AffineMap(), partType.getMemorySpace());
  return memref::ExpandShapeOp::create(b, loc, tileType, part,
                                       ArrayRef<ReassociationIndices>{{0, 1}});
}

/// The shared-memory layouts of the staged tiles (file comment): the chunk
/// where logical chunk `chunk` of row `row` is stored.
Value swizzleA(OpBuilder &b, Location loc, bool tf32, Value row, Value chunk) {
  Value s = tf32 ? rem(b, loc, row, 8)
                 : arith::MulIOp::create(b, loc, rem(b, loc, row, 4),
                                         cst(b, loc, 2));
  return arith::XOrIOp::create(b, loc, chunk, s);
}
Value swizzleB(OpBuilder &b, Location loc, bool tf32, Value k, Value chunk) {
  Value r = tf32 ? k : div(b, loc, k, 2);
  Value s = arith::MulIOp::create(b, loc, rem(b, loc, r, 4), cst(b, loc, 2));
  return arith::XOrIOp::create(b, loc, chunk, s);
}

/// Column of element `col` of a staged row under `swizzle`.
Value swizzledColumn(OpBuilder &b, Location loc, Value col,
                     function_ref<Value(Value chunk)> swizzle) {
  Value chunk = swizzle(div(b, loc, col, 4));
  return arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, chunk, cst(b, loc, 4)),
      rem(b, loc, col, 4));
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

llvm::Error mlir::vmoe::checkGPUMmaOption(llvm::StringRef option,
                                          llvm::StringRef name) {
  return ::vmoe::checkChoice(option, name, {"none", "tf32", "bf16"});
}

void mlir::vmoe::emitGPUMmaGemm(OpBuilder &b, Location loc, Value batches,
                                Value m, Value n, Value k,
                                const GPUGemmAccessors &access, GPUMma mma) {
  assert(mma != GPUMma::None && "the SIMT kernel is emitGPUGemm");
  bool tf32 = mma == GPUMma::TF32;
  Value tile = cst(b, loc, kTile), one = cst(b, loc, 1);
  gpugemm::GemmGrid grid = gpugemm::gemmGrid(b, loc, kTile, batches, m, n);
  auto shared = gpu::AddressSpaceAttr::get(b.getContext(),
                                           gpu::AddressSpace::Workgroup);
  Type f32 = b.getF32Type();
  auto aTilesType =
      MemRefType::get({kStages, kTile, kStep}, f32, AffineMap(), shared);
  auto bTilesType =
      MemRefType::get({kStages, kStep, kTile}, f32, AffineMap(), shared);
  auto launch = gpu::LaunchOp::create(
      b, loc, grid.x, grid.y, grid.z, cst(b, loc, kBlockThreads), one, one,
      /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
      /*asyncDependencies=*/{}, TypeRange{aTilesType, bTilesType});

  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value aTiles = launch.getWorkgroupAttributions()[0];
  Value bTiles = launch.getWorkgroupAttributions()[1];
  Value colBase = arith::MulIOp::create(b, loc, launch.getBlockIds().x, tile);
  Value tid = launch.getThreadIds().x;
  Value warp = div(b, loc, tid, kLanes), lane = rem(b, loc, tid, kLanes);
  Value g = div(b, loc, lane, 4), t = rem(b, loc, lane, 4);
  Value warpRow = arith::MulIOp::create(b, loc, div(b, loc, warp, 2),
                                        cst(b, loc, 32));
  Value warpCol = arith::MulIOp::create(b, loc, rem(b, loc, warp, 2),
                                        cst(b, loc, 32));
  Value t2 = arith::MulIOp::create(b, loc, t, cst(b, loc, 2));

  // Grid y and z are capped at 65,535: the rest of the row tiles and batch
  // entries loop.
  gpugemm::TileLoops tiles =
      gpugemm::openTileLoops(b, loc, launch, kTile, batches, m);
  Value batch = tiles.batch, rowBase = tiles.rowBase;
  Value rows = access.rowCount(b, loc, batch);
  auto elementA = [&](OpBuilder &b, Location loc, Value r, Value c) {
    return access.elementA(b, loc, batch, r, c);
  };
  auto elementB = [&](OpBuilder &b, Location loc, Value r, Value c) {
    return access.elementB(b, loc, batch, r, c);
  };
  Value zero = cst(b, loc, 0);
  // 16-byte copies along k (A) and n (B) where those dims are contiguous,
  // the strides keep chunks aligned and, checked at run time, the operand
  // starts 16-byte aligned; else 4-byte copies (a second version of the k
  // loop).
  Value chunksA = access.aKContiguous
                      ? gpugemm::chunkCopiesAllowed(b, loc, elementA, rowBase,
                                                    zero)
                      : Value();
  Value chunksB = !access.bKContiguous
                      ? gpugemm::chunkCopiesAllowed(b, loc, elementB, zero,
                                                    colBase)
                      : Value();

  SmallVector<scf::ForOp, 2> kLoops;
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

    // Copies of k tile kt into stage `stage`. A k tile at or past the end
    // copies nothing and zero-fills (so no branch is needed around it).
    auto issue = [&](OpBuilder &b, Location loc, Value kt, Value stage,
                     bool chunksA, bool chunksB) {
      Value k0 = arith::MulIOp::create(b, loc, kt, cst(b, loc, kStep));
      gpugemm::stageTileAsync(
          b, loc, tid, kBlockThreads, aTiles, stage, kTile, kStep,
          access.aKContiguous, chunksA, rowBase, k0, rows, k, elementA,
          [&](OpBuilder &b, Location loc, Value r, Value c) {
            return swizzleA(b, loc, tf32, r, c);
          });
      gpugemm::stageTileAsync(
          b, loc, tid, kBlockThreads, bTiles, stage, kStep, kTile,
          !access.bKContiguous, chunksB, k0, colBase, k, n, elementB,
          [&](OpBuilder &b, Location loc, Value r, Value c) {
            return swizzleB(b, loc, tf32, r, c);
          });
      return Value(nvgpu::DeviceAsyncCreateGroupOp::create(
          b, loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()),
          ValueRange{}));
    };
    Value kTiles = arith::CeilDivSIOp::create(b, loc, k, cst(b, loc, kStep));
    auto resultType =
        LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
    // The pipelined k loop, copying A and B in chunks or not.
    auto buildKLoop = [&](OpBuilder &b, Location loc, bool chunksA,
                          bool chunksB) -> scf::ForOp {
    Value token;
    for (int64_t s = 0; s + 1 < kStages; ++s)
      token = issue(b, loc, cst(b, loc, s), cst(b, loc, s), chunksA, chunksB);

    auto loop = scf::ForOp::create(
        b, loc, zero, kTiles, one, init,
        [&](OpBuilder &b, Location loc, Value kt, ValueRange acc) {
          // Tile kt has landed (this thread's copies, then everyone's), and
          // every warp is done with tile kt - 1, whose stage is refilled
          // with tile kt + kStages - 1.
          nvgpu::DeviceAsyncWaitOp::create(b, loc, token,
                                           b.getI32IntegerAttr(kStages - 2));
          gpu::BarrierOp::create(b, loc);
          Value ahead = add(b, loc, kt, kStages - 1);
          issue(b, loc, ahead, rem(b, loc, ahead, kStages), chunksA, chunksB);
          Value stage = rem(b, loc, kt, kStages);

          // TF32 A: lane l gives the address of row l % 8 + 8 ((l / 8) % 2),
          // chunk l / 16 (+ k offset) of the 16 x 8 block; row % 8 = l % 8.
          Value ldRow = arith::AddIOp::create(
              b, loc, rem(b, loc, lane, 8),
              arith::MulIOp::create(b, loc, rem(b, loc, div(b, loc, lane, 8), 2),
                                    cst(b, loc, 8)));
          auto loadA = [&](int64_t mi, int64_t ks) -> SmallVector<Value, 4> {
            SmallVector<Value, 4> frag;
            if (tf32) {
              Value row = arith::AddIOp::create(
                  b, loc, add(b, loc, warpRow, mi * 16), ldRow);
              Value chunk = add(b, loc, div(b, loc, lane, 16), ks / 4);
              Value col = arith::MulIOp::create(
                  b, loc, swizzleA(b, loc, true, row, chunk), cst(b, loc, 4));
              auto vType = VectorType::get({4, 1}, f32);
              Value v = nvgpu::LdMatrixOp::create(
                  b, loc, vType, aTiles, ValueRange{stage, row, col},
                  /*transpose=*/false, /*numTiles=*/4);
              for (int64_t j = 0; j < 4; ++j) {
                Value x = vector::ExtractOp::create(b, loc, v,
                                                    ArrayRef<int64_t>{j, 0});
                frag.push_back(toTF32F(b, loc, x));
              }
              return frag;
            }
            for (int64_t i = 0; i < 4; ++i) {
              Value row = arith::AddIOp::create(
                  b, loc, add(b, loc, warpRow, mi * 16 + 8 * (i % 2)), g);
              Value c = add(b, loc, t2, ks + 8 * (i / 2));
              Value col = swizzledColumn(b, loc, c, [&](Value chunk) -> Value {
                return swizzleA(b, loc, false, row, chunk);
              });
              Value pair = vector::LoadOp::create(
                  b, loc, VectorType::get({2}, f32), aTiles,
                  ValueRange{stage, row, col}, /*nontemporal=*/false,
                  /*alignment=*/llvm::MaybeAlign(8));
              frag.push_back(packBF16(b, loc, pair));
            }
            return frag;
          };
          auto loadB = [&](int64_t ni, int64_t ks) -> SmallVector<Value, 4> {
            Value col = arith::AddIOp::create(
                b, loc, add(b, loc, warpCol, ni * 8), g);
            auto at = [&](Value kk) -> Value {
              Value c = swizzledColumn(b, loc, col, [&](Value chunk) -> Value {
                return swizzleB(b, loc, tf32, kk, chunk);
              });
              return memref::LoadOp::create(b, loc, bTiles,
                                            ValueRange{stage, kk, c});
            };
            if (tf32)
              return {toTF32F(b, loc, at(add(b, loc, t, ks))),
                      toTF32F(b, loc, at(add(b, loc, t, ks + 4)))};
            SmallVector<Value, 4> frag;
            for (int64_t j = 0; j < 2; ++j) {
              Value kk = add(b, loc, t2, ks + 8 * j);
              frag.push_back(packBF16(b, loc, at(kk), at(add(b, loc, kk, 1))));
            }
            return frag;
          };

          SmallVector<Value> next(acc.begin(), acc.end());
          auto type = tf32 ? NVVM::MMATypes::tf32 : NVVM::MMATypes::bf16;
          int64_t mmaK = tf32 ? 8 : 16;
          for (int64_t ks = 0; ks < kStep; ks += mmaK) {
            SmallVector<SmallVector<Value, 4>> aFrags, bFrags;
            for (int64_t mi = 0; mi < kTilesM; ++mi)
              aFrags.push_back(loadA(mi, ks));
            for (int64_t ni = 0; ni < kTilesN; ++ni)
              bFrags.push_back(loadB(ni, ks));
            for (int64_t mi = 0; mi < kTilesM; ++mi) {
              for (int64_t ni = 0; ni < kTilesN; ++ni) {
                int64_t base = (mi * kTilesN + ni) * 4;
                SmallVector<Value> c(next.begin() + base,
                                     next.begin() + base + 4);
                Value d = NVVM::MmaOp::create(
                    b, loc, resultType, aFrags[mi], bFrags[ni], c,
                    ArrayRef<int64_t>{16, 8, mmaK},
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
          scf::YieldOp::create(b, loc, next);
        });
    // The last kStages - 1 groups (zero-fills past the end of k) may still
    // be in flight; they must land before the stages are reused (epilogue,
    // next tile).
    nvgpu::DeviceAsyncWaitOp::create(b, loc, token, b.getI32IntegerAttr(0));
    return loop;
    };
    ValueRange sums;
    Value aligned = chunksA && chunksB
                        ? arith::AndIOp::create(b, loc, chunksA, chunksB)
                        : chunksA ? chunksA : chunksB;
    if (!aligned) {
      kLoops.push_back(buildKLoop(b, loc, false, false));
      sums = kLoops.back().getResults();
    } else {
      auto version = scf::IfOp::create(
          b, loc, aligned,
          [&](OpBuilder &b, Location loc) {
            kLoops.push_back(buildKLoop(b, loc, bool(chunksA), bool(chunksB)));
            scf::YieldOp::create(b, loc, kLoops.back().getResults());
          },
          [&](OpBuilder &b, Location loc) {
            kLoops.push_back(buildKLoop(b, loc, false, false));
            scf::YieldOp::create(b, loc, kLoops.back().getResults());
          });
      sums = version.getResults();
    }
    // Epilogue through shared memory (the A stages, free once every warp
    // is done with them): the accumulators go to a 64 x 72 tile (rows
    // padded so that the fragments' 64-bit stores hit distinct banks), then
    // each thread stores 4 neighbouring columns of 8 rows, a warp 2 rows of
    // 64 columns: coalesced, and row-dependent work (gathers) once per row
    // and 4 columns.
    gpu::BarrierOp::create(b, loc);
    Value cTile = sharedTileView(b, loc, aTiles, kTile, kCStride);
    for (int64_t mi = 0; mi < kTilesM; ++mi)
      for (int64_t ni = 0; ni < kTilesN; ++ni)
        for (int64_t half = 0; half < 2; ++half) {
          int64_t base = (mi * kTilesN + ni) * 4 + 2 * half;
          Value pair = vector::FromElementsOp::create(
              b, loc, VectorType::get({2}, f32),
              ValueRange{sums[base], sums[base + 1]});
          Value r = arith::AddIOp::create(
              b, loc, add(b, loc, warpRow, mi * 16 + 8 * half), g);
          Value c = arith::AddIOp::create(b, loc, add(b, loc, warpCol, ni * 8),
                                          t2);
          vector::StoreOp::create(b, loc, pair, cTile, ValueRange{r, c},
                                  /*nontemporal=*/false, llvm::MaybeAlign(8));
        }
    gpu::BarrierOp::create(b, loc);
    Value c4 = arith::MulIOp::create(b, loc, rem(b, loc, tid, 16),
                                     cst(b, loc, 4));
    Value col0 = arith::AddIOp::create(b, loc, colBase, c4);
    Value fullColumns = lessThan(b, loc, add(b, loc, col0, 3), n);
    for (int64_t i = 0; i < kTile / (kBlockThreads / 16); ++i) {
      Value r = add(b, loc, div(b, loc, tid, 16), i * (kBlockThreads / 16));
      Value row = arith::AddIOp::create(b, loc, rowBase, r);
      scf::IfOp::create(b, loc, lessThan(b, loc, row, rows),
                        [&](OpBuilder &b, Location loc) {
        Value v = vector::LoadOp::create(b, loc, VectorType::get({4}, f32),
                                         cTile, ValueRange{r, c4},
                                         /*nontemporal=*/false,
                                         llvm::MaybeAlign(16));
        auto store = [&](OpBuilder &b, Location loc, int64_t j) {
          access.storeC(b, loc, batch, row, add(b, loc, col0, j),
                        vector::ExtractOp::create(b, loc, v, j));
        };
        // All four columns inside (the common case: one block, so the
        // row's work is shared), else each column checked.
        scf::IfOp::create(
            b, loc, fullColumns,
            [&](OpBuilder &b, Location loc) {
              for (int64_t j = 0; j < 4; ++j)
                store(b, loc, j);
              scf::YieldOp::create(b, loc);
            },
            [&](OpBuilder &b, Location loc) {
              for (int64_t j = 0; j < 4; ++j)
                scf::IfOp::create(b, loc, lessThan(b, loc, add(b, loc, col0, j), n),
                                  [&](OpBuilder &b, Location loc) {
                                    store(b, loc, j);
                                    scf::YieldOp::create(b, loc);
                                  });
              scf::YieldOp::create(b, loc);
            });
        scf::YieldOp::create(b, loc);
      });
    }
    // The next tile of this block refills the stages.
    gpu::BarrierOp::create(b, loc);
    scf::YieldOp::create(b, loc);
  });
  b.setInsertionPointAfter(tiles.outer);
  gpu::TerminatorOp::create(b, loc);
  // Gathered row indices and address arithmetic of the copies: once per
  // tile, not per k step.
  for (scf::ForOp loop : kLoops)
    gpugemm::hoistInvariantLoads(loop, launch);
}
