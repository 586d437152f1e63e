//===- Microkernel.cpp - Register-blocked GEMM code generation --*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Loop structure (GotoBLAS-like):
//
//   for each block of nc columns:              (scf.parallel if asked)
//     for each block of kc rows of B:
//       pack B[kc block, nc block] into panels [nc/NR][kc][NR], reading B
//         row by row (sequential memory; the tail panel zero-padded),
//         unless B arrives packed (constant weights packed once at load,
//         GemmAccessors::loadPackedB), when the panels are read in place
//       for each column panel of the block:
//         for each tile of `rows` rows, then one of the m % rows rows left
//         (exact: a kernel per remainder size, no padded rows):
//           acc = first k block ? initC : the partial sums
//           for k in block: acc += broadcast(A[row, k]) * panel[k]
//             (bf16 pair panels: for each pair of k, BF16Pairs.h)
//           last k block ? storeC (epilogue) : store the partial sums
//
// Packing makes B contiguous (weights with power-of-two rows otherwise alias
// in one cache set) and streams it from memory once; a packed kc x nc block
// (512 KB) stays in the L2 cache while every row tile reuses it. Column
// blocks are independent (own packing scratch, own columns of
// C), so they run on any number of threads with the same result. The
// packing scratch is a block's own memref.alloca (kc x nc floats,
// 512 KB at most) between llvm.intr.stacksave and stackrestore around the
// block, or before bufferization the caller's alloca of one block
// (allocaBlockScratch), scoped the same way by vmoe-lower-to-cpu after the
// deallocation pipeline: it lives on the stack of the thread that runs the
// block, so no call, batch or block allocates from the heap, and its pages,
// touched once per thread, stay mapped from call to call (no page faults
// per call).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Codegen/Microkernel.h"

#include "vmoe/Codegen/BF16Pairs.h"
#include "vmoe/Support/OptionChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::vmoe;

llvm::Error mlir::vmoe::checkMicrokernelOptions(int64_t lanes, int64_t rows,
                                                int64_t vectors,
                                                bool zeroMeansDefault) {
  if (llvm::Error e = ::vmoe::checkRange("vector-width", lanes, 1,
                                         kMaxMicrokernelLanes))
    return e;
  int64_t least = zeroMeansDefault ? 0 : 1;
  if (llvm::Error e =
          ::vmoe::checkRange("tile-rows", rows, least, kMaxMicrokernelRows))
    return e;
  return ::vmoe::checkRange("tile-vectors", vectors, least,
                            kMaxMicrokernelVectors);
}

MicrokernelShape mlir::vmoe::tileForColumns(MicrokernelShape shape,
                                            std::optional<int64_t> n) {
  if (!n || shape.rows != 8 || shape.vectors != 3)
    return shape;
  auto padding = [&](int64_t width) {
    return llvm::divideCeil(*n, width) * width - *n;
  };
  MicrokernelShape wide = shape;
  wide.rows = 6;
  wide.vectors = 4;
  return padding(wide.panelWidth()) < padding(shape.panelWidth()) ? wide
                                                                  : shape;
}

Value mlir::vmoe::loadVector(OpBuilder &b, Location loc, VectorType type,
                             Value base, ValueRange indices, Value mask) {
  if (!mask)
    return vector::LoadOp::create(b, loc, type, base, indices);
  Value zero = arith::ConstantOp::create(
      b, loc, type,
      DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0)));
  return vector::MaskedLoadOp::create(b, loc, type, base, indices, mask, zero);
}

void mlir::vmoe::storeVector(OpBuilder &b, Location loc, Value value,
                             Value base, ValueRange indices, Value mask) {
  if (!mask) {
    vector::StoreOp::create(b, loc, value, base, indices);
    return;
  }
  vector::MaskedStoreOp::create(b, loc, base, indices, mask, value);
}

static Value cst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// scf.for over [lb, ub) step `step` without carried values.
static void forLoop(OpBuilder &b, Location loc, Value lb, Value ub, Value step,
                    function_ref<void(OpBuilder &, Location, Value)> body) {
  scf::ForOp::create(b, loc, lb, ub, step, ValueRange{},
                     [&](OpBuilder &b, Location loc, Value iv, ValueRange) {
                       body(b, loc, iv);
                       scf::YieldOp::create(b, loc);
                     });
}

namespace {

/// Emits the GEMM of one call to emitGemm.
struct GemmEmitter {
  const MicrokernelShape &shape;
  const GemmAccessors &access;
  Value m, n, k;
  int64_t kcRows; ///< Rows of B per packed block.
  VectorType vectorType;
  Value mBegin; ///< The first row (null: 0); rows [mBegin, m).

  /// The first column of vector `v` of the panel at `n0`.
  Value column(OpBuilder &b, Location loc, Value n0, int64_t v) const {
    return v == 0 ? n0
                  : Value(arith::AddIOp::create(b, loc, n0,
                                                cst(b, loc, v * shape.lanes)));
  }

  /// The lanes of vector `v` at `n0` that lie before n (null: all).
  Value mask(OpBuilder &b, Location loc, Value n0, int64_t v,
             bool full) const {
    if (full)
      return Value();
    Value left = arith::SubIOp::create(b, loc, n, column(b, loc, n0, v));
    auto maskType = VectorType::get({shape.lanes}, b.getI1Type());
    return vector::CreateMaskOp::create(b, loc, maskType, ValueRange{left});
  }

  /// Packs B[kc0 : kc0 + kLen, jc : jc + panels * NR] into `packed`
  /// [panels][kc][NR].
  void pack(OpBuilder &b, Location loc, Value packed, Value jc, Value kc0,
            Value kLen, Value panels, bool alwaysFull) const {
    Value width = cst(b, loc, shape.panelWidth());
    forLoop(b, loc, cst(b, loc, 0), kLen, cst(b, loc, 1),
            [&](OpBuilder &b, Location loc, Value kk) {
              Value row = arith::AddIOp::create(b, loc, kc0, kk);
              forLoop(b, loc, cst(b, loc, 0), panels, cst(b, loc, 1),
                      [&](OpBuilder &b, Location loc, Value p) {
                        Value n0 = arith::AddIOp::create(
                            b, loc, jc,
                            arith::MulIOp::create(b, loc, p, width));
                        for (int64_t v = 0; v < shape.vectors; ++v) {
                          Value vec = access.loadB(
                              b, loc, row, column(b, loc, n0, v),
                              mask(b, loc, n0, v, alwaysFull));
                          vector::StoreOp::create(
                              b, loc, vec, packed,
                              ValueRange{p, kk, cst(b, loc, v * shape.lanes)});
                        }
                      });
            });
  }

  /// One tile of `tileRows` rows (all of them before m) of one panel over
  /// one k block.
  void tile(OpBuilder &b, Location loc, Value packed, Value p, Value n0,
            Value m0, int64_t tileRows, Value kc0, Value kLen, Value isFirst,
            Value isLast, bool alwaysFull, Value prefetchOffset) const {
    SmallVector<Value> rows;
    for (int64_t i = 0; i < tileRows; ++i)
      rows.push_back(
          i == 0 ? m0
                 : Value(arith::AddIOp::create(b, loc, m0, cst(b, loc, i))));
    SmallVector<Value> columns, masks;
    for (int64_t v = 0; v < shape.vectors; ++v) {
      columns.push_back(column(b, loc, n0, v));
      masks.push_back(mask(b, loc, n0, v, alwaysFull));
    }
    // The accumulators: from initC on the first block, else the partials.
    SmallVector<Type> types(tileRows * shape.vectors, vectorType);
    auto start = scf::IfOp::create(
        b, loc, types, isFirst,
        /*addThenBlock=*/true, /*addElseBlock=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(start.thenBlock());
      SmallVector<Value> init;
      for (int64_t i = 0; i < tileRows; ++i)
        for (int64_t v = 0; v < shape.vectors; ++v)
          init.push_back(access.initC(b, loc, rows[i], columns[v], masks[v]));
      scf::YieldOp::create(b, loc, init);
      b.setInsertionPointToStart(start.elseBlock());
      SmallVector<Value> partial;
      for (int64_t i = 0; i < tileRows; ++i)
        for (int64_t v = 0; v < shape.vectors; ++v)
          partial.push_back(
              access.loadPartial(b, loc, rows[i], columns[v], masks[v]));
      scf::YieldOp::create(b, loc, partial);
    }
    // What the epilogue will read and write, fetched while the tile
    // computes (MicrokernelShape::prefetch).
    if (shape.prefetch && access.prefetchC)
      scf::IfOp::create(b, loc, isLast, [&](OpBuilder &b, Location loc) {
        for (int64_t i = 0; i < tileRows; ++i)
          for (int64_t v = 0; v < shape.vectors; ++v)
            access.prefetchC(b, loc, rows[i], columns[v]);
        scf::YieldOp::create(b, loc);
      });
    // bf16 pair panels: one step per pair of k (blocks start at even k).
    bool pairs = static_cast<bool>(access.loadBPairs);
    Value steps =
        pairs ? Value(arith::CeilDivUIOp::create(b, loc, kLen, cst(b, loc, 2)))
              : kLen;
    auto loop = scf::ForOp::create(
        b, loc, cst(b, loc, 0), steps, cst(b, loc, 1), start.getResults(),
        [&](OpBuilder &b, Location loc, Value kk, ValueRange acc) {
          if (pairs) {
            Value pair = arith::AddIOp::create(
                b, loc, arith::DivUIOp::create(b, loc, kc0, cst(b, loc, 2)),
                kk);
            prefetchNextPanel(b, loc, n0, prefetchOffset, pair);
            scf::YieldOp::create(b, loc,
                                 pairStep(b, loc, rows, columns, kc0, kk, acc));
            return;
          }
          Value kAbs = arith::AddIOp::create(b, loc, kc0, kk);
          prefetchNextPanel(b, loc, n0, prefetchOffset, kAbs);
          SmallVector<Value> bVectors;
          for (int64_t v = 0; v < shape.vectors; ++v)
            bVectors.push_back(
                packed ? Value(vector::LoadOp::create(
                             b, loc, vectorType, packed,
                             ValueRange{p, kk, cst(b, loc, v * shape.lanes)}))
                       : access.loadPackedB(b, loc, kAbs, columns[v]));
          SmallVector<Value> next;
          for (int64_t i = 0; i < tileRows; ++i) {
            Value a = access.loadA(b, loc, rows[i], kAbs);
            Value splat = vector::BroadcastOp::create(b, loc, vectorType, a);
            for (int64_t v = 0; v < shape.vectors; ++v)
              next.push_back(vector::FMAOp::create(
                  b, loc, splat, bVectors[v], acc[i * shape.vectors + v]));
          }
          scf::YieldOp::create(b, loc, next);
        });
    for (int64_t i = 0; i < tileRows; ++i) {
      scf::IfOp::create(
          b, loc, isLast,
          [&](OpBuilder &b, Location loc) {
            for (int64_t v = 0; v < shape.vectors; ++v)
              access.storeC(b, loc, rows[i], columns[v],
                            loop.getResult(i * shape.vectors + v), masks[v]);
            scf::YieldOp::create(b, loc);
          },
          [&](OpBuilder &b, Location loc) {
            for (int64_t v = 0; v < shape.vectors; ++v)
              access.storePartial(b, loc, rows[i], columns[v],
                                  loop.getResult(i * shape.vectors + v),
                                  masks[v]);
            scf::YieldOp::create(b, loc);
          });
    }
  }

  /// Prefetches B at row `k` (or k pair) of the panel `offset` columns
  /// after the one at `n0` (nextPanelOffset), when asked
  /// (MicrokernelShape::prefetch).
  void prefetchNextPanel(OpBuilder &b, Location loc, Value n0, Value offset,
                         Value k) const {
    if (!shape.prefetch || !access.prefetchB)
      return;
    Value next = arith::AddIOp::create(b, loc, n0, offset);
    for (int64_t v = 0; v < shape.vectors; ++v)
      access.prefetchB(b, loc, k, column(b, loc, next, v));
  }

  /// The accumulators after k pair `kc0 / 2 + kk` of a bf16 pair GEMM.
  SmallVector<Value> pairStep(OpBuilder &b, Location loc, ArrayRef<Value> rows,
                              ArrayRef<Value> columns, Value kc0, Value kk,
                              ValueRange acc) const {
    BF16PairProducts products{shape.bf16Dot, shape.lanes};
    Value pair = arith::AddIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, kc0, cst(b, loc, 2)), kk);
    SmallVector<SmallVector<Value, 2>> bOperands;
    for (int64_t v = 0; v < shape.vectors; ++v)
      bOperands.push_back(products.prepareB(
          b, loc, access.loadBPairs(b, loc, pair, columns[v])));
    SmallVector<Value> next;
    for (auto [i, row] : llvm::enumerate(rows)) {
      SmallVector<Value, 2> a =
          products.prepareA(b, loc, access.loadAPair(b, loc, row, pair));
      for (int64_t v = 0; v < shape.vectors; ++v)
        next.push_back(products.update(b, loc, acc[i * shape.vectors + v], a,
                                       bOperands[v]));
    }
    return next;
  }

  /// The columns from a panel to the one its tiles prefetch: the next
  /// panel (shape.panelWidth()) when the GEMM has more rows than one tile,
  /// else 0. The prefetch hides the next panel's first tile, which reads B
  /// from memory, behind this panel's other tiles, which read it from
  /// cache. A GEMM of one tile has no other tiles: its prefetches only
  /// compete with its own loads of B, which the hardware prefetchers
  /// already follow (f32 V-MoE-S at C 0.1, two rows per expert: +1.8-2.8%
  /// images/s without them). Offset 0 prefetches the lines the tile loads
  /// at the same k: a select, not a second copy of the k loop.
  Value nextPanelOffset(OpBuilder &b, Location loc, Value begin) const {
    Value severalTiles = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::sgt,
        arith::SubIOp::create(b, loc, m, begin), cst(b, loc, shape.rows));
    return arith::SelectOp::create(
        b, loc, severalTiles, cst(b, loc, shape.panelWidth()), cst(b, loc, 0));
  }

  /// The row tiles of one panel over one k block: full tiles of shape.rows
  /// rows, then one tile of exactly the rows left (no padded rows).
  void rowTiles(OpBuilder &b, Location loc, Value packed, Value p, Value n0,
                Value kc0, Value kLen, Value isFirst, Value isLast,
                bool alwaysFull) const {
    Value tileRows = cst(b, loc, shape.rows);
    Value begin = mBegin ? mBegin : cst(b, loc, 0);
    Value prefetchOffset = shape.prefetch && access.prefetchB
                               ? nextPanelOffset(b, loc, begin)
                               : Value();
    Value left = arith::RemUIOp::create(
        b, loc, mBegin ? arith::SubIOp::create(b, loc, m, mBegin) : m,
        tileRows);
    Value fullEnd = arith::SubIOp::create(b, loc, m, left);
    forLoop(b, loc, begin, fullEnd, tileRows,
            [&](OpBuilder &b, Location loc, Value m0) {
              tile(b, loc, packed, p, n0, m0, shape.rows, kc0, kLen, isFirst,
                   isLast, alwaysFull, prefetchOffset);
            });
    if (shape.rows == 1)
      return;
    SmallVector<int64_t> cases;
    for (int64_t r = 1; r < shape.rows; ++r)
      cases.push_back(r);
    auto remainder = scf::IndexSwitchOp::create(b, loc, TypeRange{}, left,
                                                cases, cases.size());
    OpBuilder::InsertionGuard guard(b);
    for (auto [i, r] : llvm::enumerate(cases)) {
      Block &block = remainder.getCaseRegions()[i].emplaceBlock();
      b.setInsertionPointToStart(&block);
      tile(b, loc, packed, p, n0, fullEnd, r, kc0, kLen, isFirst, isLast,
           alwaysFull, prefetchOffset);
      scf::YieldOp::create(b, loc);
    }
    b.setInsertionPointToStart(&remainder.getDefaultRegion().emplaceBlock());
    scf::YieldOp::create(b, loc);
  }
};

} // namespace

/// Blocks of kc x nc: a packed block of 512 KB (half the L2 of the CPUs
/// we target) with kc = 512 rows, so that C is revisited only every 512 k
/// (a D = 512 layer never): V-MoE-S/32's dense twin measured 4% faster at
/// 32 images and 2% at 8 than with 256 KB and kc = 256, whose row tiles
/// waited on C's partial sums coming back from L3.
static constexpr int64_t kBlockRows = 512;
static int64_t blockColumns(const MicrokernelShape &shape) {
  constexpr int64_t kBlockBytes = 512 * 1024;
  int64_t width = shape.panelWidth();
  return std::max<int64_t>(width, kBlockBytes / 4 / kBlockRows / width * width);
}

/// One block's packing scratch: [nc / width, kc, width] f32.
static MemRefType blockScratchType(OpBuilder &b,
                                   const MicrokernelShape &shape) {
  int64_t width = shape.panelWidth();
  return MemRefType::get({blockColumns(shape) / width, kBlockRows, width},
                         b.getF32Type());
}

Value mlir::vmoe::allocaBlockScratch(OpBuilder &b, Location loc,
                                     const MicrokernelShape &shape) {
  auto alloca = memref::AllocaOp::create(b, loc, blockScratchType(b, shape),
                                         b.getI64IntegerAttr(64));
  alloca->setAttr(kStackScratchAttrName, b.getUnitAttr());
  return alloca;
}

void mlir::vmoe::emitGemm(OpBuilder &b, Location loc, Value m, Value n,
                          Value k, std::optional<int64_t> staticN,
                          const MicrokernelShape &shape,
                          const GemmAccessors &access, Value scratch,
                          Value parallelThreads) {
  int64_t width = shape.panelWidth(), nc = blockColumns(shape);
  constexpr int64_t kc = kBlockRows;
  bool alwaysFull = staticN && *staticN % width == 0;
  auto vectorType = VectorType::get({shape.lanes}, b.getF32Type());
  GemmEmitter emitter{shape, access, m, n, k, kc, vectorType, Value()};

  Value widthValue = cst(b, loc, width);
  Value kcValue = cst(b, loc, kc), ncValue = cst(b, loc, nc);
  Value lastBlockStart = arith::MulIOp::create(
      b, loc,
      arith::DivSIOp::create(b, loc,
                             arith::SubIOp::create(b, loc, k, cst(b, loc, 1)),
                             kcValue),
      kcValue);

  // One column block: its own packing scratch and its own columns of C, so
  // blocks may run on any threads with the same result.
  auto blockBody = [&](OpBuilder &b, Location loc, Value jc, Value ncLen,
                       Value packed, const GemmEmitter &emitter) {
    Value panels = arith::CeilDivSIOp::create(b, loc, ncLen, widthValue);
    // The tiles of panel p over the k block at kc0.
    auto panelTiles = [&](OpBuilder &b, Location loc, Value p, Value kc0,
                          Value kLen) {
      Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                            kc0, cst(b, loc, 0));
      Value isLast = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                           kc0, lastBlockStart);
      Value n0 = arith::AddIOp::create(
          b, loc, jc, arith::MulIOp::create(b, loc, p, widthValue));
      emitter.rowTiles(b, loc, packed, p, n0, kc0, kLen, isFirst, isLast,
                       alwaysFull);
    };
    auto blockLength = [&](OpBuilder &b, Location loc, Value kc0) {
      return Value(arith::MinSIOp::create(
          b, loc, kcValue, arith::SubIOp::create(b, loc, k, kc0)));
    };
    // k blocks outside, panels inside: every panel's tiles reuse a packed
    // block. Panel-packed B may swap the two (below) where the caller asks
    // (GemmAccessors::oneTileByPanels) and it can matter: K over one block
    // and M not known to exceed one tile.
    std::optional<int64_t> staticK = getConstantIntValue(k);
    std::optional<int64_t> staticM = getConstantIntValue(m);
    if (packed || !access.oneTileByPanels || (staticK && *staticK <= kc) ||
        (staticM && !emitter.mBegin && *staticM > shape.rows)) {
      forLoop(b, loc, cst(b, loc, 0), k, kcValue,
              [&](OpBuilder &b, Location loc, Value kc0) {
                Value kLen = blockLength(b, loc, kc0);
                if (packed)
                  emitter.pack(b, loc, packed, jc, kc0, kLen, panels,
                               alwaysFull);
                forLoop(b, loc, cst(b, loc, 0), panels, cst(b, loc, 1),
                        [&](OpBuilder &b, Location loc, Value p) {
                          panelTiles(b, loc, p, kc0, kLen);
                        });
              });
      return;
    }
    // Otherwise k blocks outside as well, except in a GEMM of one row tile
    // (an expert's few rows at small batch), which reuses nothing across
    // panels: it takes each panel's k blocks in turn instead and reads its
    // weights in storage order, one sequential stream (12% faster from DRAM
    // at one thread in a microbenchmark of V-MoE-S's down projection); the
    // sums over k run in the same order. One loop nest whose two levels
    // swap roles at run time, so that the tiles are emitted once.
    Value begin = emitter.mBegin ? emitter.mBegin : cst(b, loc, 0);
    Value oneTile = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::sle,
        arith::SubIOp::create(b, loc, m, begin), cst(b, loc, shape.rows));
    Value kBlockCount = arith::CeilDivSIOp::create(b, loc, k, kcValue);
    auto pick = [&](OpBuilder &b, Location loc, Value ifOne, Value ifMany) {
      return Value(arith::SelectOp::create(b, loc, oneTile, ifOne, ifMany));
    };
    forLoop(
        b, loc, cst(b, loc, 0), pick(b, loc, panels, kBlockCount),
        cst(b, loc, 1), [&](OpBuilder &b, Location loc, Value outer) {
          forLoop(
              b, loc, cst(b, loc, 0), pick(b, loc, kBlockCount, panels),
              cst(b, loc, 1), [&](OpBuilder &b, Location loc, Value inner) {
                Value p = pick(b, loc, outer, inner);
                Value kc0 = arith::MulIOp::create(
                    b, loc, pick(b, loc, inner, outer), kcValue);
                panelTiles(b, loc, p, kc0, blockLength(b, loc, kc0));
              });
        });
  };
  auto columnBlock = [&](OpBuilder &b, Location loc, Value jc, Value ncLen,
                         const GemmEmitter &emitter) {
    // B in panel layout already (f32 or bf16 pairs): no scratch, no packing.
    if (access.loadPackedB || access.loadBPairs) {
      blockBody(b, loc, jc, ncLen, Value(), emitter);
      return;
    }
    // The caller's block scratch, reused by each block in turn.
    if (scratch) {
      blockBody(b, loc, jc, ncLen, scratch, emitter);
      return;
    }
    // The stack pointer is restored after the block, so a loop of blocks
    // (or of batches) reuses the same stack bytes. (Not memref.alloca_scope:
    // its single block cannot hold the control flow of the loops inside
    // once scf is lowered.)
    Value stack = LLVM::StackSaveOp::create(
        b, loc, LLVM::LLVMPointerType::get(b.getContext()));
    Value packed = memref::AllocaOp::create(b, loc, blockScratchType(b, shape),
                                            b.getI64IntegerAttr(64));
    blockBody(b, loc, jc, ncLen, packed, emitter);
    LLVM::StackRestoreOp::create(b, loc, stack);
  };
  auto allColumns = [&](OpBuilder &b, Location loc,
                        const GemmEmitter &emitter) {
    forLoop(b, loc, cst(b, loc, 0), n, ncValue,
            [&](OpBuilder &b, Location loc, Value jc) {
              columnBlock(
                  b, loc, jc,
                  arith::MinSIOp::create(b, loc, ncValue,
                                         arith::SubIOp::create(b, loc, n, jc)),
                  emitter);
            });
  };
  if (parallelThreads) {
    assert(!scratch && "parallel blocks need a scratch each");
    // One panel of columns (a router's few experts): balanced blocks of
    // row tiles instead, each over all of n (packing B itself). Rows
    // split, the sums over k are the same whatever the thread count.
    if (staticN && *staticN <= width) {
      emitBalancedBlocks(b, loc, m, shape.rows, /*maxUnitsPerBlock=*/0,
                         parallelThreads,
                         [&](OpBuilder &b, Location loc, Value r0, Value rows) {
                           GemmEmitter block = emitter;
                           block.mBegin = r0;
                           block.m = arith::AddIOp::create(b, loc, r0, rows);
                           allColumns(b, loc, block);
                         });
      return;
    }
    emitBalancedBlocks(b, loc, n, width, nc / width, parallelThreads,
                       [&](OpBuilder &b, Location loc, Value jc, Value ncLen) {
                         columnBlock(b, loc, jc, ncLen, emitter);
                       });
    return;
  }
  allColumns(b, loc, emitter);
}

void mlir::vmoe::emitBalancedBlocks(
    OpBuilder &b, Location loc, Value extent, int64_t unit,
    int64_t maxUnitsPerBlock, Value threads,
    llvm::function_ref<void(OpBuilder &, Location, Value, Value)> body) {
  Value unitValue = cst(b, loc, unit);
  Value units = arith::CeilDivUIOp::create(b, loc, extent, unitValue);
  Value blocks = threads;
  if (maxUnitsPerBlock > 0) {
    Value fewest = arith::CeilDivUIOp::create(b, loc, units,
                                              cst(b, loc, maxUnitsPerBlock));
    blocks = arith::MulIOp::create(
        b, loc, arith::CeilDivUIOp::create(b, loc, fewest, threads), threads);
  }
  blocks = arith::MinUIOp::create(b, loc, blocks, units);
  // Where block i starts: unit i * units / blocks, clamped to the extent.
  auto start = [&](OpBuilder &b, Location loc, Value block) {
    Value first = arith::DivUIOp::create(
        b, loc, arith::MulIOp::create(b, loc, block, units), blocks);
    return Value(arith::MinUIOp::create(
        b, loc, arith::MulIOp::create(b, loc, first, unitValue), extent));
  };
  scf::ParallelOp::create(
      b, loc, ValueRange{cst(b, loc, 0)}, ValueRange{blocks},
      ValueRange{cst(b, loc, 1)},
      [&](OpBuilder &b, Location loc, ValueRange ivs) {
        Value begin = start(b, loc, ivs[0]);
        Value end = start(
            b, loc, arith::AddIOp::create(b, loc, ivs[0], cst(b, loc, 1)));
        body(b, loc, begin, arith::SubIOp::create(b, loc, end, begin));
      });
}
