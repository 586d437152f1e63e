//===- GPUGemmStaging.h - Shared parts of the GPU GEMM kernels --*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Internal to lib/Codegen: operand staging into shared memory and the
// starting value of the accumulators, used by the SIMT and the tensor-core
// GEMM kernels.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_LIB_CODEGEN_GPUGEMMSTAGING_H
#define VMOE_LIB_CODEGEN_GPUGEMMSTAGING_H

#include "vmoe/Codegen/GPUGemm.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::vmoe::gpugemm {

/// Element (row, col) of a staged operand tile, in global indices.
using TileElementFn =
    llvm::function_ref<MemRefElement(OpBuilder &, Location, Value row,
                                     Value col)>;

/// Copies the `rows` x `cols` tile at (rowBase, colBase) of an operand into
/// `tile` (shared memory), `threads` threads with ids `tid` taking
/// rows * cols / threads elements each; elements outside rowLimit x colLimit
/// are 0. With `colsFastest`, neighbouring threads take neighbouring
/// columns (the operand's columns are contiguous), else neighbouring rows.
void stageTile(OpBuilder &b, Location loc, Value tid, int64_t threads,
               Value tile, int64_t rows, int64_t cols, bool colsFastest,
               Value rowBase, Value colBase, Value rowLimit, Value colLimit,
               TileElementFn element);

/// The 16-byte chunk of a staged tile row where logical chunk `chunk` of
/// row `row` is stored (an XOR swizzle that keeps the fragment reads free of
/// bank conflicts without padding).
using ChunkSwizzleFn =
    llvm::function_ref<Value(OpBuilder &, Location, Value row, Value chunk)>;

/// Whether an operand whose tile columns are contiguous in memory can be
/// staged in 16-byte chunks: null when it never can (the strides of the
/// memref `element` reads are not static multiples of 4 elements, or its
/// innermost stride is not 1), else an i1 computed at the insertion point:
/// the operand's first element (aligned pointer + offset) is 16-byte
/// aligned, so that a chunk starting at a column multiple of 4 is too. The
/// ops `element` creates to compute its indices are discarded.
Value chunkCopiesAllowed(OpBuilder &b, Location loc, TileElementFn element,
                         Value row, Value col);

/// Issues asynchronous copies (cp.async, nvgpu.device_async_copy) of the
/// `rows` x `cols` tile at (rowBase, colBase) of an operand into
/// `tile[stage, row, col]` (shared memory, f32), `threads` threads with ids
/// `tid` taking equal shares; elements outside rowLimit x colLimit are
/// zero-filled by the copy (never read). With `chunks` (the tile's columns
/// are contiguous in memory, see chunkCopiesAllowed), 16-byte copies along
/// the columns, neighbouring threads on neighbouring chunks; else 4-byte
/// copies, neighbouring threads along the operand's contiguous dim
/// (`colsContiguous`). Column c of row r lands at chunk
/// swizzle(r, c / 4), element c % 4. The caller commits the group.
void stageTileAsync(OpBuilder &b, Location loc, Value tid, int64_t threads,
                    Value tile, Value stage, int64_t rows, int64_t cols,
                    bool colsContiguous, bool chunks, Value rowBase,
                    Value colBase, Value rowLimit, Value colLimit,
                    TileElementFn element, ChunkSwizzleFn swizzle);

/// Hoists the loop-invariant computation of `loop` out of it: pure ops and
/// memref.load ops of buffers that nothing inside `launch` writes (operand
/// gathers such as slot tables), so that they are not redone per k step.
void hoistInvariantLoads(scf::ForOp loop, gpu::LaunchOp launch);

/// The value the accumulator of C[row, col] starts from: access.initC (0
/// outside rows x n, read at clamped indices) or 0.0.
Value initialAccumulator(OpBuilder &b, Location loc,
                         const GPUGemmAccessors &access, Value batch,
                         Value row, Value col, Value rows, Value n);

/// Largest grid y and z of a launch.
constexpr int64_t kMaxGridYZ = 65535;

/// The grid of a GEMM kernel with `tile` x `tile` tiles of C: x the column
/// tiles, y the row tiles and z the batch entries, y and z capped at
/// 65,535 (openTileLoops loops over the rest), each at least 1.
struct GemmGrid {
  Value x, y, z;
};
GemmGrid gemmGrid(OpBuilder &b, Location loc, int64_t tile, Value batches,
                  Value m, Value n);

/// In a launch body: opens the grid-stride loops over batch entries (block
/// z) and row tiles (block y) and leaves the insertion point inside them.
/// `outer` is the outermost loop.
struct TileLoops {
  Value batch, rowBase;
  Operation *outer;
};
TileLoops openTileLoops(OpBuilder &b, Location loc, gpu::LaunchOp launch,
                        int64_t tile, Value batches, Value m);

/// Index constant.
Value indexConstant(OpBuilder &b, Location loc, int64_t v);

/// a < c (signed, index).
Value lessThan(OpBuilder &b, Location loc, Value a, Value c);

} // namespace mlir::vmoe::gpugemm

#endif // VMOE_LIB_CODEGEN_GPUGEMMSTAGING_H
