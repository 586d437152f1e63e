//===- GPUGemmStaging.cpp - Shared parts of the GPU GEMM kernels -*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "GPUGemmStaging.h"

#include "vmoe/Codegen/MemRefShapes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

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

/// Whether the strides of `type` keep 4-element chunks of its innermost
/// dim 16-byte aligned relative to its first element.
static bool chunkStrides(MemRefType type) {
  int64_t rank = type.getRank();
  if (rank == 0)
    return false;
  if (type.getLayout().isIdentity())
    return rank == 1 || (!type.isDynamicDim(rank - 1) &&
                         type.getDimSize(rank - 1) % 4 == 0);
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) || strides.back() != 1)
    return false;
  return llvm::all_of(ArrayRef<int64_t>(strides).drop_back(), [](int64_t s) {
    return !ShapedType::isDynamic(s) && s % 4 == 0;
  });
}

Value gpugemm::chunkCopiesAllowed(OpBuilder &b, Location loc,
                                  TileElementFn element, Value row,
                                  Value col) {
  // Build the element's index computation in a detached block to find the
  // memref it reads, then drop the ops again (last first: uses precede).
  Value memref;
  {
    Block scratch;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&scratch);
    memref = element(b, loc, row, col).memref;
    if (memref.getParentBlock() == &scratch)
      memref = nullptr; // Made by the callback: not usable here.
    while (!scratch.empty())
      scratch.back().erase();
  }
  if (!memref)
    return nullptr;
  auto type = cast<MemRefType>(memref.getType());
  if (!chunkStrides(type))
    return nullptr;
  SmallVector<int64_t> strides;
  int64_t staticOffset = 0;
  if (!type.getLayout().isIdentity())
    (void)type.getStridesAndOffset(strides, staticOffset);
  if (!ShapedType::isDynamic(staticOffset) && staticOffset % 4 != 0)
    return nullptr;
  Value offset =
      ShapedType::isDynamic(staticOffset)
          ? memref::ExtractStridedMetadataOp::create(b, loc, memref)
                .getOffset()
          : indexConstant(b, loc, staticOffset);
  Value pointer =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value bytes = arith::MulIOp::create(
      b, loc, offset,
      indexConstant(b, loc, type.getElementTypeBitWidth() / 8));
  Value address = arith::AddIOp::create(b, loc, pointer, bytes);
  return arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, loc, address, indexConstant(b, loc, 16)),
      indexConstant(b, loc, 0));
}

void gpugemm::stageTileAsync(OpBuilder &b, Location loc, Value tid,
                             int64_t threads, Value tile, Value stage,
                             int64_t rows, int64_t cols, bool colsContiguous,
                             bool chunks, Value rowBase, Value colBase,
                             Value rowLimit, Value colLimit,
                             TileElementFn element, ChunkSwizzleFn swizzle) {
  auto cst = [&](int64_t v) { return indexConstant(b, loc, v); };
  Value zero = cst(0), one = cst(1), four = cst(4);
  Value lastRow = arith::SubIOp::create(b, loc, rowLimit, one);
  Value lastCol = arith::SubIOp::create(b, loc, colLimit, one);
  Type token = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  assert(!chunks || colsContiguous);
  assert(rows % 4 == 0 && cols % 4 == 0 && (rows * cols) % (4 * threads) == 0 &&
         "runs of 4 must split over the threads");
  // Each thread copies runs of 4 elements along the operand's contiguous
  // dim (one 16-byte chunk, or four 4-byte copies from neighbouring
  // addresses: one address computation per run either way), neighbouring
  // threads on neighbouring runs so that global reads coalesce.
  int64_t runsPerLine = colsContiguous ? cols / 4 : rows / 4;
  std::optional<bool> async;
  Value fZero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  for (int64_t l = 0; l < rows * cols / (4 * threads); ++l) {
    Value idx = arith::AddIOp::create(b, loc, tid, cst(l * threads));
    Value run = arith::RemUIOp::create(b, loc, idx, cst(runsPerLine));
    Value line = arith::DivUIOp::create(b, loc, idx, cst(runsPerLine));
    Value run4 = arith::MulIOp::create(b, loc, run, four);
    // First element of the run (tile coordinates).
    Value r0 = colsContiguous ? line : run4, c0 = colsContiguous ? run4 : line;
    if (chunks) {
      Value row = arith::AddIOp::create(b, loc, rowBase, r0);
      Value col = arith::AddIOp::create(b, loc, colBase, c0);
      // Elements of the chunk inside the operand (0 to 4); a chunk past the
      // edge reads nothing from a valid, aligned place (column 0).
      Value left = arith::SubIOp::create(b, loc, colLimit, col);
      Value count = arith::MaxSIOp::create(
          b, loc, arith::MinSIOp::create(b, loc, left, four), zero);
      count = arith::SelectOp::create(b, loc, lessThan(b, loc, row, rowLimit),
                                      count, zero);
      Value srcCol = arith::SelectOp::create(
          b, loc, lessThan(b, loc, col, colLimit), col, zero);
      MemRefElement src = element(
          b, loc, arith::MinSIOp::create(b, loc, row, lastRow), srcCol);
      Value dstCol = arith::MulIOp::create(b, loc, swizzle(b, loc, r0, run),
                                           four);
      nvgpu::DeviceAsyncCopyOp::create(
          b, loc, token, tile, ValueRange{stage, r0, dstCol}, src.memref,
          src.indices, b.getIndexAttr(4), count, b.getUnitAttr());
      continue;
    }
    for (int64_t i = 0; i < 4; ++i) {
      Value r = colsContiguous ? r0 : arith::AddIOp::create(b, loc, r0, cst(i));
      Value c = colsContiguous ? arith::AddIOp::create(b, loc, c0, cst(i)) : c0;
      Value row = arith::AddIOp::create(b, loc, rowBase, r);
      Value col = arith::AddIOp::create(b, loc, colBase, c);
      Value ok = arith::AndIOp::create(b, loc, lessThan(b, loc, row, rowLimit),
                                       lessThan(b, loc, col, colLimit));
      MemRefElement src =
          element(b, loc, arith::MinSIOp::create(b, loc, row, lastRow),
                  arith::MinSIOp::create(b, loc, col, lastCol));
      if (!async)
        async = hasUnitInnerStride(cast<MemRefType>(src.memref.getType()));
      Value chunk = swizzle(b, loc, r, arith::DivUIOp::create(b, loc, c, four));
      SmallVector<Value, 3> dst = {
          stage, r,
          arith::AddIOp::create(b, loc,
                                arith::MulIOp::create(b, loc, chunk, four),
                                arith::RemUIOp::create(b, loc, c, four))};
      if (*async) {
        Value count = arith::SelectOp::create(b, loc, ok, one, zero);
        nvgpu::DeviceAsyncCopyOp::create(b, loc, token, tile, dst, src.memref,
                                         src.indices, b.getIndexAttr(1), count,
                                         /*bypassL1=*/nullptr);
        continue;
      }
      // An operand without a unit-stride dim: a plain load and store (the
      // caller's wait and barrier order it like the copies).
      Value v = loadElement(b, loc, src);
      memref::StoreOp::create(
          b, loc, arith::SelectOp::create(b, loc, ok, v, fZero), tile, dst);
    }
  }
}

void gpugemm::hoistInvariantLoads(scf::ForOp loop, gpu::LaunchOp launch) {
  // Buffers written inside the launch, by their root allocation.
  auto root = [](Value v) {
    while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
      v = view.getViewSource();
    return v;
  };
  llvm::SmallPtrSet<Value, 8> written;
  launch.walk([&](Operation *op) {
    if (auto store = dyn_cast<memref::StoreOp>(op))
      written.insert(root(store.getMemRef()));
    else if (auto copy = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op))
      written.insert(root(copy.getDst()));
    else if (auto store = dyn_cast<vector::StoreOp>(op))
      written.insert(root(store.getBase()));
  });
  moveLoopInvariantCode(
      {&loop.getRegion()},
      [&](Value v, Region *) { return loop.isDefinedOutsideOfLoop(v); },
      [&](Operation *op, Region *) {
        if (auto load = dyn_cast<memref::LoadOp>(op))
          return !written.contains(root(load.getMemRef()));
        return op->getNumRegions() == 0 && isMemoryEffectFree(op);
      },
      [&](Operation *op, Region *) { loop.moveOutOfLoop(op); });
}
