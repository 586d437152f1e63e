//===- ClaimOMPIterations.cpp - vmoe-claim-omp-iterations -------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// A dynamic omp.wsloop that is all its omp.parallel does becomes a claim
// loop on a shared atomic counter (Passes.td says why).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOECLAIMOMPITERATIONSPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

namespace mlir::vmoe {
namespace {

/// The loop nest of `loop` when it can be claimed: a dynamic schedule of
/// chunks of one, no reduction, no other clause that changes what a thread
/// runs, index bounds and positive steps, the only op of its parallel
/// region but the terminator, that region not nested in another.
omp::LoopNestOp claimableNest(omp::WsloopOp loop) {
  if (loop.getScheduleKind() != omp::ClauseScheduleKind::Dynamic ||
      loop.getScheduleChunk() || loop.getScheduleMod() ||
      !loop.getReductionVars().empty() || loop.getOrdered() ||
      !loop.getPrivateVars().empty() || !loop.getLinearVars().empty())
    return {};
  auto parallel = dyn_cast<omp::ParallelOp>(loop->getParentOp());
  if (!parallel || !parallel.getRegion().hasOneBlock())
    return {};
  // A region nested in another runs on every thread of the outer one at
  // once (serialized), each needing its own counter: left to libomp.
  if (parallel->getParentOfType<omp::ParallelOp>())
    return {};
  // The trip count is computed before the region: no private or reduction
  // block arguments there that the bounds could use.
  Block &block = parallel.getRegion().front();
  if (block.getNumArguments() != 0 || &block.front() != loop.getOperation() ||
      !isa<omp::TerminatorOp>(loop->getNextNode()))
    return {};
  auto nest = dyn_cast<omp::LoopNestOp>(loop.getWrappedLoop());
  if (!nest || nest.getLoopInclusive())
    return {};
  for (Value iv : nest.getIVs())
    if (!iv.getType().isIndex())
      return {};
  // Trip counts below assume positive steps (as scf.parallel's are).
  for (Value step : nest.getLoopSteps())
    if (std::optional<int64_t> constant = getConstantIntValue(step);
        constant && *constant <= 0)
      return {};
  return nest;
}

/// ceil((ub - lb) / step), 0 when empty; `step` > 0.
Value tripCount(OpBuilder &b, Location loc, Value lb, Value ub, Value step) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value span = arith::SubIOp::create(b, loc, ub, lb);
  Value rounded = arith::AddIOp::create(
      b, loc, span, arith::SubIOp::create(b, loc, step, one));
  Value count = arith::DivSIOp::create(b, loc, rounded, step);
  return arith::MaxSIOp::create(b, loc, count, zero);
}

struct VMoEClaimOMPIterationsPass
    : impl::VMoEClaimOMPIterationsPassBase<VMoEClaimOMPIterationsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<omp::WsloopOp> loops;
    func.walk([&](omp::WsloopOp loop) {
      if (claimableNest(loop))
        loops.push_back(loop);
    });
    if (loops.empty())
      return;
    // A counter per loop, zeroed before its region.
    OpBuilder b(&getContext());
    b.setInsertionPointToStart(&func.getBody().front());
    auto counterType = MemRefType::get({}, b.getI64Type());
    for (omp::WsloopOp loop : loops) {
      Value counter = memref::AllocaOp::create(b, loop.getLoc(), counterType);
      claim(loop, claimableNest(loop), counter);
    }
  }

  /// parallel { wsloop { nest(ivs) { body } } } ->
  /// counter = 0; parallel { claim: i = counter++; i < n ? body(ivs(i)),
  /// claim : exit }
  static void claim(omp::WsloopOp loop, omp::LoopNestOp nest, Value counter) {
    Location loc = loop.getLoc();
    auto parallel = cast<omp::ParallelOp>(loop->getParentOp());
    OpBuilder b(parallel);
    Value zero64 = arith::ConstantIntOp::create(b, loc, 0, 64);
    memref::StoreOp::create(b, loc, zero64, counter);

    // Trip counts outside the region (its bounds are defined there too).
    SmallVector<Value> counts;
    for (auto [lb, ub, step] :
         llvm::zip_equal(nest.getLoopLowerBounds(), nest.getLoopUpperBounds(),
                         nest.getLoopSteps()))
      counts.push_back(tripCount(b, loc, lb, ub, step));
    Value total = counts.front();
    for (Value count : ArrayRef(counts).drop_front())
      total = arith::MulIOp::create(b, loc, total, count);

    // The region: entry -> claim -> (body ... -> claim) | exit.
    Region &region = parallel.getRegion();
    Block *entry = &region.front();
    Block *claimBlock = b.createBlock(&region, region.end());
    Block *exitBlock = b.createBlock(&region, region.end());
    Operation *terminator = entry->getTerminator();
    terminator->moveBefore(exitBlock, exitBlock->end());

    b.setInsertionPointToEnd(claimBlock);
    Value one64 = arith::ConstantIntOp::create(b, loc, 1, 64);
    Value claimed64 = memref::AtomicRMWOp::create(
        b, loc, arith::AtomicRMWKind::addi, one64, counter, ValueRange{});
    Value claimed =
        arith::IndexCastOp::create(b, loc, b.getIndexType(), claimed64);
    Value more = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                       claimed, total);

    // Body blocks move into the region; the ivs come from `claimed`, the
    // last dim fastest (as a collapsed loop numbers them).
    Region &body = nest.getRegion();
    Block *bodyEntry = &body.front();
    SmallVector<Block *> bodyBlocks;
    for (Block &block : body)
      bodyBlocks.push_back(&block);
    for (Block *block : bodyBlocks)
      block->moveBefore(exitBlock);
    cf::CondBranchOp::create(b, loc, more, bodyEntry, ValueRange{}, exitBlock,
                             ValueRange{});

    OpBuilder ivs = OpBuilder::atBlockBegin(bodyEntry);
    SmallVector<Value> ivValues(counts.size());
    Value rest = claimed;
    for (int64_t d = static_cast<int64_t>(counts.size()) - 1; d >= 0; --d) {
      Value index = rest;
      if (d > 0) {
        index = arith::RemSIOp::create(ivs, loc, rest, counts[d]);
        rest = arith::DivSIOp::create(ivs, loc, rest, counts[d]);
      }
      Value scaled =
          arith::MulIOp::create(ivs, loc, index, nest.getLoopSteps()[d]);
      ivValues[d] =
          arith::AddIOp::create(ivs, loc, scaled, nest.getLoopLowerBounds()[d]);
    }
    for (auto [arg, value] :
         llvm::zip_equal(bodyEntry->getArguments(), ivValues))
      arg.replaceAllUsesWith(value);
    bodyEntry->eraseArguments(0, bodyEntry->getNumArguments());
    for (Block *block : bodyBlocks) {
      auto yield = dyn_cast<omp::YieldOp>(block->getTerminator());
      if (!yield)
        continue;
      OpBuilder atYield(yield);
      cf::BranchOp::create(atYield, yield.getLoc(), claimBlock);
      yield.erase();
    }

    OpBuilder atEntry = OpBuilder::atBlockEnd(entry);
    cf::BranchOp::create(atEntry, loc, claimBlock);
    loop.erase();
  }
};

} // namespace
} // namespace mlir::vmoe
