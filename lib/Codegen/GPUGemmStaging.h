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
