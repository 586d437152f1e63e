//===- GPUGemm.h - Tiled shared-memory GEMM kernels -------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Emits a batched C[M, N] = A[M, K] * B[K, N] as one gpu.launch: one thread
// block per 64 x 64 tile of C and batch entry, 16 x 16 threads with a 4 x 4
// register tile each, A and B staged through shared memory 16 values of k
// at a time, accumulation with fma in k order. Operand access goes through
// callbacks (rows gathered by slot tables, fused epilogues). Every element
// of C has one writer, so results do not depend on the schedule.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_CODEGEN_GPUGEMM_H
#define VMOE_CODEGEN_GPUGEMM_H

#include "mlir/IR/Builders.h"

#include <functional>

namespace mlir::vmoe {

/// How a GPU GEMM kernel reads and writes its operands. `batch` is the
/// batch index (block z); indices are `index` values; loads are only
/// called for in-bounds elements.
struct GPUGemmAccessors {
  /// Rows of C (and A) that exist in this batch entry (<= M).
  std::function<Value(OpBuilder &, Location, Value batch)> rowCount;
  /// A[row, k].
  std::function<Value(OpBuilder &, Location, Value batch, Value row, Value k)>
      loadA;
  /// B[k, col].
  std::function<Value(OpBuilder &, Location, Value batch, Value k, Value col)>
      loadB;
  /// Epilogue and store of C[row, col] = acc.
  std::function<void(OpBuilder &, Location, Value batch, Value row, Value col,
                     Value acc)>
      storeC;
};

/// Emits the kernel over `batches` batch entries of an (M x K) * (K x N)
/// product (index values) as a gpu.launch at the insertion point.
void emitGPUGemm(OpBuilder &b, Location loc, Value batches, Value m, Value n,
                 Value k, const GPUGemmAccessors &access);

} // namespace mlir::vmoe

#endif // VMOE_CODEGEN_GPUGEMM_H
