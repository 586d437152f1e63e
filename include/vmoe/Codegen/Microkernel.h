//===- Microkernel.h - Register-blocked GEMM code generation ----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Emits C[M, N] (+)= A[M, K] * B[K, N] as scf loops over blocks of k (B
// packed into contiguous panels), column panels and row tiles around a
// register-blocked microkernel: a tile of `rows` x (`vectors` x `lanes`)
// accumulators in vector registers, updated per k with one broadcast of A
// per row and `vectors` loads of packed B (vector.fma). Operand
// access goes through callbacks, so the same kernel serves plain matmuls,
// gathered rows (MoE dispatch fused into the GEMM) and scattered,
// weighted outputs (combine fused into the epilogue).
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_CODEGEN_MICROKERNEL_H
#define VMOE_CODEGEN_MICROKERNEL_H

#include "mlir/IR/Builders.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>

namespace mlir::vmoe {

/// The register tile of the microkernel.
struct MicrokernelShape {
  int64_t rows = 6;    ///< Rows of C per tile (MR).
  int64_t vectors = 2; ///< Vectors per row (NR = vectors * lanes).
  int64_t lanes = 8;   ///< f32 lanes per vector (8: AVX2, 16: AVX-512).
  /// bf16 pair GEMMs (GemmAccessors::loadBPairs) form their products with
  /// vdpbf16ps (x86vector.avx512.dot: the target has AVX512_BF16, and
  /// AVX512VL below 16 lanes), else with a 16-bit shift and f32 fmas.
  bool bf16Dot = false;
  /// With GemmAccessors::prefetchB: every row tile prefetches, per k, the
  /// lines of B the next column panel will read at the same k, so that the
  /// first tile of each panel finds its weights in cache instead of waiting
  /// on memory (weights read once per call stream from DRAM), in GEMMs of
  /// more rows than one tile (a single tile has no other tiles to hide the
  /// prefetch behind: it prefetches its own lines instead); and, with
  /// GemmAccessors::prefetchC, every tile fetches the lines its epilogue
  /// will touch when it starts its last block of k.
  bool prefetch = false;

  int64_t panelWidth() const { return vectors * lanes; }
};

/// The register tile for a GEMM of `n` columns: `shape`, or, when `shape`
/// is the AVX-512 tile of 8 rows x 3 vectors, 6 rows x 4 vectors (24
/// accumulators too) where its wider panels pad fewer columns: attention's
/// T = 50 keys and dh = 64 channels (96 columns computed with 48-wide
/// panels, 64 with 64-wide ones), and the D = 512 and 4D = 2048 columns of
/// V-MoE-S's projections (11 and 43 panels of 48, the last one third and
/// two thirds empty, vs 8 and 32 full panels of 64: at 2 threads 4 + 4
/// panels instead of 6 + 5). Any other shape is kept.
MicrokernelShape tileForColumns(MicrokernelShape shape,
                                std::optional<int64_t> n);

/// The largest register tile the options of the passes and pipelines
/// take: vectors of 64 f32 lanes (four times AVX-512's), 16 rows, 8
/// vectors per row. Every tile up to this size compiles in seconds; larger
/// ones only unroll into more spills.
inline constexpr int64_t kMaxMicrokernelLanes = 64;
inline constexpr int64_t kMaxMicrokernelRows = 16;
inline constexpr int64_t kMaxMicrokernelVectors = 8;

/// Checks the options vector-width (`lanes`), tile-rows and tile-vectors
/// against the bounds above; with `zeroMeansDefault`, tile-rows and
/// tile-vectors may also be 0 (the pipeline then picks them by width).
llvm::Error checkMicrokernelOptions(int64_t lanes, int64_t rows,
                                    int64_t vectors, bool zeroMeansDefault);

/// How the microkernel reads and writes its operands. `n` is the first
/// column of a vector; `mask` is null for a full vector, else an i1 vector
/// of the valid lanes.
struct GemmAccessors {
  /// A[row, k], a scalar.
  std::function<Value(OpBuilder &, Location, Value row, Value k)> loadA;
  /// B[k, n .. n + lanes), a vector.
  std::function<Value(OpBuilder &, Location, Value k, Value n, Value mask)>
      loadB;
  /// When set, B is already in panel layout (constant weights packed once):
  /// B[k, n .. n + lanes) read in place, a full vector whose lanes past the
  /// last column may hold anything (they are never stored). loadB is then
  /// unused and nothing is packed.
  std::function<Value(OpBuilder &, Location, Value k, Value n)> loadPackedB;
  /// When set (with loadAPair), B is in bf16 pair panel layout: the word
  /// of k pair j (k = 2j, 2j + 1) of columns [n, n + lanes) as a vector of
  /// i32, each the bf16 of B[2j, n + i] in its low and of B[2j + 1, n + i]
  /// in its high 16 bits (BF16Pairs.h); lanes past the last column may hold
  /// anything. The GEMM then steps over k pairs and multiplies bf16 values
  /// exactly, accumulating in f32; loadA, loadB and loadPackedB are unused.
  std::function<Value(OpBuilder &, Location, Value pair, Value n)> loadBPairs;
  /// Optional, with loadPackedB or loadBPairs: prefetches the line that
  /// reads B at (k, or k pair, n .. n + lanes) (MicrokernelShape::prefetch).
  std::function<void(OpBuilder &, Location, Value k, Value n)> prefetchB;
  /// A[row, 2j .. 2j + 1] as one i32 word of two bf16 (the high half 0
  /// past k).
  std::function<Value(OpBuilder &, Location, Value row, Value pair)> loadAPair;
  /// The accumulator C[row, n ..) starts from: zeros, or the current C.
  std::function<Value(OpBuilder &, Location, Value row, Value n, Value mask)>
      initC;
  /// Finishes C[row, n ..) from the accumulator: epilogue and store.
  std::function<void(OpBuilder &, Location, Value row, Value n, Value acc,
                     Value mask)>
      storeC;
  /// Optional, with MicrokernelShape::prefetch: prefetches what storeC will
  /// read and write at C[row, n ..) (C's line, an epilogue's residual),
  /// called per row and vector at the start of a tile's last block of k, so
  /// that the lines arrive while the tile computes instead of stalling its
  /// stores.
  std::function<void(OpBuilder &, Location, Value row, Value n)> prefetchC;
  /// Partial sums of C[row, n ..) between blocks of k (for a plain C: load
  /// and store C itself).
  std::function<Value(OpBuilder &, Location, Value row, Value n, Value mask)>
      loadPartial;
  std::function<void(OpBuilder &, Location, Value row, Value n, Value acc,
                     Value mask)>
      storePartial;
  /// With B read from panels (loadPackedB, loadBPairs) over several blocks
  /// of k: a GEMM of at most one row tile takes each panel's k blocks in
  /// turn (panels outside), reading B in storage order as one sequential
  /// stream, instead of every panel per k block. Set by the expert GEMMs,
  /// whose rows per expert are few at small batch or capacity; the order
  /// is chosen at run time, so the loop bounds are not constants (dense
  /// bf16 pair GEMMs over blocks of rows measured 2x slower that way).
  bool oneTileByPanels = false;
};

/// The discardable unit attribute marking a memref.alloca made by
/// allocaBlockScratch: vmoe-lower-to-cpu puts llvm.intr.stacksave before it
/// and llvm.intr.stackrestore before the terminator of its block, once the
/// deallocation pipeline (which rejects those intrinsics) has run.
inline constexpr llvm::StringLiteral kStackScratchAttrName =
    "vmoe.stack_scratch";

/// memref.alloca (marked kStackScratchAttrName) of one block's packing
/// scratch (512 KB at most), for emitGemm before bufferization: created at
/// the start of a loop iteration (an scf.forall iteration of an expert or
/// group) and reused by every GEMM and block of it, on the stack of the
/// thread that runs it; vmoe-lower-to-cpu frees it at the end of the
/// iteration.
Value allocaBlockScratch(OpBuilder &b, Location loc,
                         const MicrokernelShape &shape);

/// Emits the GEMM over rows [0, m), columns [0, n) and reduction [0, k)
/// (index values), reading B in place through `access.loadPackedB` when
/// set, else packing each block of B into `scratch` (allocaBlockScratch,
/// reused by each block in turn; not with `parallelThreads`) or, with a
/// null `scratch` (after bufferization and its deallocation pass), into a
/// scratch of at most
/// 512 KB on the stack of the thread that computes the block (memref.alloca
/// between llvm.intr.stacksave and stackrestore per block: no heap
/// allocation per call or tile, its pages stay mapped from call to call;
/// the calling pass depends on the LLVM dialect). `staticN`, when known, drops
/// the masks if n is a multiple of the panel width. With `parallelThreads`,
/// the loop over blocks of columns is an scf.parallel (each block writes
/// its own columns of C and packs into its own scratch, so the result does
/// not depend on the schedule) over balanced blocks of panels for
/// `parallelThreads` threads (emitBalancedBlocks); where a static n fits
/// one panel (a router's experts) the blocks are of row tiles instead,
/// one per thread, each packing all of B. A null value keeps the blocks in
/// one sequential loop.
void emitGemm(OpBuilder &b, Location loc, Value m, Value n, Value k,
              std::optional<int64_t> staticN, const MicrokernelShape &shape,
              const GemmAccessors &access, Value scratch,
              Value parallelThreads);

/// An scf.parallel over blocks of [0, extent) (index) cut at multiples of
/// `unit` (row tiles, column panels), at most `maxUnitsPerBlock` units
/// each, as many blocks as the smallest multiple of `threads` (index,
/// >= 1) that keeps that bound (0: no bound, one block per thread; never
/// more blocks than units), the units
/// spread evenly (block i: units [i * U / B, (i + 1) * U / B)): every
/// thread gets the same work up to one unit per block, where fixed blocks
/// leave a short last one (400 rows in blocks of at most 128 on 2 threads:
/// 104, 104, 104, 88 rows instead of 128, 128, 128, 16). `body` gets the
/// block's start and length.
void emitBalancedBlocks(
    OpBuilder &b, Location loc, Value extent, int64_t unit,
    int64_t maxUnitsPerBlock, Value threads,
    llvm::function_ref<void(OpBuilder &, Location, Value start, Value length)>
        body);

/// A vector of zeros, or `vector.maskedload` / `vector.load` of
/// base[indices] with lanes beyond `mask` read as 0.
Value loadVector(OpBuilder &b, Location loc, VectorType type, Value base,
                 ValueRange indices, Value mask);

/// `vector.maskedstore` or `vector.store` of `value` at base[indices].
void storeVector(OpBuilder &b, Location loc, Value value, Value base,
                 ValueRange indices, Value mask);

} // namespace mlir::vmoe

#endif // VMOE_CODEGEN_MICROKERNEL_H
