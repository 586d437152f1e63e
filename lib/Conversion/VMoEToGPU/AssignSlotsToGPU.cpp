//===- AssignSlotsToGPU.cpp - assign_slots as a warp scan -------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe.assign_slots as one gpu.launch of a per-expert prefix count. Per
// group, the assignment of DispatchLowering.cpp visits the entries (choice
// i, priority position p) in (i, p) order and keeps an entry while its
// expert has fewer than `limit` kept ones. Since fill only grows and
// saturates, the slot of a valid entry routed to expert e is its rank among
// the valid entries of e that come earlier, and it is kept iff rank < limit:
//
//   slots[g, t, i]           = rank, or -1 (dropped, id outside [0, E),
//                              masked by num_valid);
//   slot_entries[e, g, rank] = t * k + i for rank < fill[e, g], else -1;
//   fill[e, g]               = min(valid entries of e, limit).
//
// Kernel: one warp per (group, expert), 4 warps per block (threads 32 x 4),
// warps numbered on grid x (at most 65,535 blocks; a warp-stride loop
// covers the rest). A warp walks its group's entries 32 at a time (lane l
// takes position p0 + l of choice i; the last chunk of a choice is partial,
// so no division is needed); `nvvm.vote.sync` ballot gives the mask of the
// lanes whose entry is the warp's expert's, and the population count of the
// mask below the lane (`llvm.intr.ctpop`: convert-gpu-to-nvvm leaves
// math.ctpop alone) gives the rank. The warp stops once its expert is full.
// Lane 0 writes fill, the lanes write -1 past it in the expert's
// slot_entries row; slots are set to -1 by a fill kernel before. Every
// element has one writer, so results do not depend on the schedule (but
// for slots when `order` is not a permutation, as bpr_sort's always is:
// order entries outside [0, S) are clamped, never followed, as on the CPU,
// and a token named twice gets one of its entries' slots).
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"

#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::vmoe;

namespace {

/// Lanes per warp, warps per block, and the blocks of one launch (grid x
/// could take more; 65,535 keeps it within every grid dim's limit).
constexpr int64_t kWarpSize = 32, kWarpsPerBlock = 4, kMaxBlocks = 65535;

using P = arith::CmpIPredicate;

/// arith.cmpi.
Value cmp(OpBuilder &b, Location loc, P predicate, Value x, Value y) {
  return arith::CmpIOp::create(b, loc, predicate, x, y);
}

/// An index as i32.
Value toI32(OpBuilder &b, Location loc, Value index) {
  return arith::IndexCastOp::create(b, loc, b.getI32Type(), index);
}

/// The operands and results of one assign_slots, as memrefs.
struct SlotScan {
  Value ids, order;     ///< [G, S, k] and [G, S] (or null), read only.
  Value slots, entries; ///< [G, S, k] (filled with -1), [E, G, B].
  Value fill;           ///< [E, G].
  Value numValid;       ///< Tokens g * S + t >= numValid are masked; or null.
  Value groups, tokens, choices, experts, capacity, limit; ///< index.

  /// The scan of warp `w` (group w / E, expert w % E) in lane `lane`.
  void emitWarp(OpBuilder &b, Location loc, Value w, Value lane) const;
};

void SlotScan::emitWarp(OpBuilder &b, Location loc, Value w, Value lane) const {
  Type i32 = b.getI32Type();
  Value zero = indexConst(b, loc, 0), one = indexConst(b, loc, 1);
  Value warpSize = indexConst(b, loc, kWarpSize);
  Value g = arith::DivUIOp::create(b, loc, w, experts);
  Value e = arith::RemUIOp::create(b, loc, w, experts);
  Value e32 = toI32(b, loc, e);
  Value lastToken = arith::SubIOp::create(b, loc, tokens, one);
  // Lanes below this one, as a mask of the ballot.
  Value lane32 = toI32(b, loc, lane);
  Value below = arith::SubIOp::create(
      b, loc, arith::ShLIOp::create(b, loc, i32Const(b, loc, 1), lane32),
      i32Const(b, loc, 1));
  // No entries at all when S = 0 (ids would be read out of bounds).
  Value rounds = arith::SelectOp::create(
      b, loc, cmp(b, loc, P::sgt, tokens, zero), choices, zero);

  // (choice i, first position p0 of the chunk, valid entries of e so far).
  SmallVector<Type> types(3, b.getIndexType());
  auto loop = scf::WhileOp::create(
      b, loc, types, ValueRange{zero, zero, zero},
      [&](OpBuilder &b, Location loc, ValueRange state) {
        Value more =
            arith::AndIOp::create(b, loc, cmp(b, loc, P::slt, state[0], rounds),
                                  cmp(b, loc, P::slt, state[2], limit));
        scf::ConditionOp::create(b, loc, more, state);
      },
      [&](OpBuilder &b, Location loc, ValueRange state) {
        Value i = state[0], p0 = state[1], count = state[2];
        Value p = arith::AddIOp::create(b, loc, p0, lane);
        Value inside = cmp(b, loc, P::slt, p, tokens);
        Value at = arith::SelectOp::create(b, loc, inside, p, zero);
        // The token; an out-of-range order entry is clamped.
        Value t = at;
        if (order) {
          Value o = memref::LoadOp::create(b, loc, order, ValueRange{g, at});
          t = arith::IndexCastOp::create(b, loc, b.getIndexType(), o);
          t = arith::MaxSIOp::create(
              b, loc, arith::MinSIOp::create(b, loc, t, lastToken), zero);
        }
        Value id = memref::LoadOp::create(b, loc, ids, ValueRange{g, t, i});
        Value mine =
            arith::AndIOp::create(b, loc, inside, cmp(b, loc, P::eq, id, e32));
        if (numValid) {
          Value position = arith::AddIOp::create(
              b, loc, arith::MulIOp::create(b, loc, g, tokens), t);
          mine = arith::AndIOp::create(b, loc, mine,
                                       cmp(b, loc, P::slt, position, numValid));
        }
        Value ballot =
            NVVM::VoteSyncOp::create(b, loc, i32, i32Const(b, loc, -1), mine,
                                     NVVM::VoteSyncKind::ballot);
        auto popcount = [&](Value mask) -> Value {
          Value bits = LLVM::CtPopOp::create(b, loc, mask);
          return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), bits);
        };
        Value rank = arith::AddIOp::create(
            b, loc, count,
            popcount(arith::AndIOp::create(b, loc, ballot, below)));
        Value kept = arith::AndIOp::create(b, loc, mine,
                                           cmp(b, loc, P::slt, rank, limit));
        scf::IfOp::create(b, loc, kept, [&](OpBuilder &b, Location loc) {
          memref::StoreOp::create(b, loc, toI32(b, loc, rank), slots,
                                  ValueRange{g, t, i});
          Value entry = arith::AddIOp::create(
              b, loc, arith::MulIOp::create(b, loc, t, choices), i);
          memref::StoreOp::create(b, loc, toI32(b, loc, entry), entries,
                                  ValueRange{e, g, rank});
          scf::YieldOp::create(b, loc);
        });
        Value next = arith::AddIOp::create(b, loc, p0, warpSize);
        Value wrap = cmp(b, loc, P::sge, next, tokens);
        scf::YieldOp::create(
            b, loc,
            ValueRange{
                arith::SelectOp::create(
                    b, loc, wrap, arith::AddIOp::create(b, loc, i, one), i),
                arith::SelectOp::create(b, loc, wrap, zero, next),
                arith::AddIOp::create(b, loc, count, popcount(ballot))});
      });

  Value filled = arith::MinSIOp::create(b, loc, loop.getResult(2), limit);
  scf::IfOp::create(b, loc, cmp(b, loc, P::eq, lane, zero),
                    [&](OpBuilder &b, Location loc) {
                      memref::StoreOp::create(b, loc, toI32(b, loc, filled),
                                              fill, ValueRange{e, g});
                      scf::YieldOp::create(b, loc);
                    });
  scf::ForOp::create(b, loc, arith::AddIOp::create(b, loc, filled, lane),
                     capacity, warpSize, ValueRange{},
                     [&](OpBuilder &b, Location loc, Value r, ValueRange) {
                       memref::StoreOp::create(b, loc, i32Const(b, loc, -1),
                                               entries, ValueRange{e, g, r});
                       scf::YieldOp::create(b, loc);
                     });
}

/// vmoe.assign_slots -> the -1 fill of slots, then the scan kernel.
struct AssignSlotsToGPU : OpConversionPattern<AssignSlotsOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(AssignSlotsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Type i32 = b.getI32Type();
    auto entriesType = cast<RankedTensorType>(op.getSlotEntries().getType());
    // assign_slots-C4: static E and B >= 1.
    int64_t numExperts = entriesType.getDimSize(0);
    int64_t capacity = entriesType.getDimSize(2);

    SlotScan scan;
    scan.ids = readOnlyBuffer(b, loc, adaptor.getExpertIds());
    if (Value order = adaptor.getOrder())
      scan.order = readOnlyBuffer(b, loc, order);
    scan.numValid = adaptor.getNumValid();
    SmallVector<Value> sizes = getValueOrCreateConstantIndexOp(
        b, loc, mixedSizes(b, loc, adaptor.getExpertIds()));
    scan.groups = sizes[0];
    scan.tokens = sizes[1];
    scan.choices = sizes[2];
    scan.experts = indexConst(b, loc, numExperts);
    scan.capacity = indexConst(b, loc, capacity);
    // min(runtime, B), and a negative runtime capacity keeps nothing.
    scan.limit = scan.capacity;
    if (Value runtime = adaptor.getRuntimeCapacity())
      scan.limit = arith::MaxSIOp::create(
          b, loc, arith::MinSIOp::create(b, loc, runtime, scan.capacity),
          indexConst(b, loc, 0));

    auto slotsType = MemRefType::get(
        cast<RankedTensorType>(op.getSlots().getType()).getShape(), i32);
    scan.slots = allocWithSizes(b, loc, slotsType,
                                {scan.groups, scan.tokens, scan.choices});
    linalg::FillOp::create(b, loc, ValueRange{i32Const(b, loc, -1)},
                           ValueRange{scan.slots});
    scan.entries =
        allocWithSizes(b, loc, MemRefType::get(entriesType.getShape(), i32),
                       {scan.experts, scan.groups, scan.capacity});
    auto fillType = MemRefType::get(
        cast<RankedTensorType>(op.getFill().getType()).getShape(), i32);
    scan.fill = allocWithSizes(b, loc, fillType, {scan.experts, scan.groups});

    emitLaunch(b, loc, scan);

    SmallVector<Value> memrefs = {scan.slots, scan.entries, scan.fill};
    SmallVector<Value> results;
    for (auto [memref, result] : llvm::zip_equal(memrefs, op.getResults()))
      results.push_back(bufferization::ToTensorOp::create(
          b, loc, result.getType(), memref, /*restrict=*/true,
          /*writable=*/true));
    rewriter.replaceOp(op, results);
    return success();
  }

  /// The launch: warps of 32 lanes (thread x), kWarpsPerBlock per block
  /// (thread y), warp w = block x * kWarpsPerBlock + thread y.
  static void emitLaunch(OpBuilder &b, Location loc, const SlotScan &scan) {
    Value one = indexConst(b, loc, 1);
    Value perBlock = indexConst(b, loc, kWarpsPerBlock);
    Value warps = arith::MulIOp::create(b, loc, scan.groups, scan.experts);
    Value blocks = arith::MaxUIOp::create(
        b, loc,
        arith::MinUIOp::create(
            b, loc, arith::CeilDivUIOp::create(b, loc, warps, perBlock),
            indexConst(b, loc, kMaxBlocks)),
        one);
    auto launch = gpu::LaunchOp::create(
        b, loc, blocks, one, one, indexConst(b, loc, kWarpSize), perBlock, one);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&launch.getBody().front());
    Value first = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, launch.getBlockIds().x, perBlock),
        launch.getThreadIds().y);
    Value stride =
        arith::MulIOp::create(b, loc, launch.getGridSize().x, perBlock);
    Value lane = launch.getThreadIds().x;
    // The bounds are uniform in a warp, so its lanes stay converged for
    // the ballots.
    scf::ForOp::create(b, loc, first, warps, stride, ValueRange{},
                       [&](OpBuilder &b, Location loc, Value w, ValueRange) {
                         scan.emitWarp(b, loc, w, lane);
                         scf::YieldOp::create(b, loc);
                       });
    gpu::TerminatorOp::create(b, loc);
  }
};

} // namespace

void mlir::vmoe::populateAssignSlotsToGPUPatterns(ConversionTarget &target,
                                                  RewritePatternSet &patterns) {
  target.addIllegalOp<AssignSlotsOp>();
  patterns.add<AssignSlotsToGPU>(patterns.getContext());
}
