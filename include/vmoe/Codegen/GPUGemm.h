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
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>

namespace mlir::vmoe {

/// One element of a GEMM operand in memory.
struct MemRefElement {
  Value memref;
  SmallVector<Value, 4> indices;
};

/// How a GPU GEMM kernel reads and writes its operands. `batch` is the
/// batch index (block z); indices are `index` values. Operands are named by
/// the memref element they read (so that a kernel may load them or copy
/// them asynchronously); elements are only asked for in-bounds indices.
struct GPUGemmAccessors {
  /// Rows of C (and A) that exist in this batch entry (<= M).
  std::function<Value(OpBuilder &, Location, Value batch)> rowCount;
  /// A[row, k].
  std::function<MemRefElement(OpBuilder &, Location, Value batch, Value row,
                              Value k)>
      elementA;
  /// B[k, col].
  std::function<MemRefElement(OpBuilder &, Location, Value batch, Value k,
                              Value col)>
      elementB;
  /// Which dim of A is contiguous in memory: k (row-major A, the default)
  /// or the row. Staging reads the contiguous dim with neighbouring
  /// threads, so that global loads coalesce.
  bool aKContiguous = true;
  /// Which dim of B is contiguous: the column (row-major B, the default) or
  /// k (B = W^T of a row-major W, e.g. the keys in Q K^T).
  bool bKContiguous = false;
  /// Optional: the value the sum over k starts from for C[row, col] (null:
  /// 0.0). Called with in-bounds indices only.
  std::function<Value(OpBuilder &, Location, Value batch, Value row,
                      Value col)>
      initC;
  /// Epilogue and store of C[row, col] = acc.
  std::function<void(OpBuilder &, Location, Value batch, Value row, Value col,
                     Value acc)>
      storeC;
};

/// Loads `element` (memref.load).
Value loadElement(OpBuilder &b, Location loc, const MemRefElement &element);

/// Emits the kernel over `batches` batch entries of an (M x K) * (K x N)
/// product (index values) as a gpu.launch at the insertion point.
void emitGPUGemm(OpBuilder &b, Location loc, Value batches, Value m, Value n,
                 Value k, const GPUGemmAccessors &access);

/// Which instructions multiply in a GPU GEMM kernel.
enum class GPUMma {
  /// FP32 fma (SIMT), emitGPUGemm: exact in k order, the reference.
  None,
  /// Tensor cores, mma.sync m16n8k8 on TF32 operands (rounded to nearest,
  /// ties away from zero, to 10 mantissa bits), FP32 accumulation.
  TF32,
  /// Tensor cores, mma.sync m16n8k16 on bf16 operands (rounded to nearest
  /// even), FP32 accumulation.
  BF16,
};

/// Parses "none", "tf32" or "bf16".
std::optional<GPUMma> parseGPUMma(llvm::StringRef name);

/// Checks an option naming GPUMma: "<option> must be none, tf32 or bf16,
/// got '<name>'".
llvm::Error checkGPUMmaOption(llvm::StringRef option, llvm::StringRef name);

/// Emits the kernel of emitGPUGemm() on tensor cores (GPUMmaGemm.cpp):
/// 64 x 64 tile per block, 4 warps of 32 x 32 (2 x 4 mma tiles of 16 x 8
/// each, 32 FP32 accumulators per thread in registers), A and B copied by
/// cp.async into a 3-stage ring of XOR-swizzled shared tiles (fragment reads
/// free of bank conflicts), C stored through a shared tile. `mma` must not
/// be None.
void emitGPUMmaGemm(OpBuilder &b, Location loc, Value batches, Value m,
                    Value n, Value k, const GPUGemmAccessors &access,
                    GPUMma mma);

} // namespace mlir::vmoe

#endif // VMOE_CODEGEN_GPUGEMM_H
