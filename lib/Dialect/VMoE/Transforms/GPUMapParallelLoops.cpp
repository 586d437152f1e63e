//===- GPUMapParallelLoops.cpp - vmoe-gpu-map-parallel-loops ----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// scf.parallel (top level) -> gpu.launch over the linearized iteration
// space:
//
//   n_i = max(ceildiv(ub_i - lb_i, step_i), 0),  total = n_0 * ... * n_{r-1}
//   gpu.launch blocks (min(max(ceildiv(total, T), 1), maxBlocks), 1, 1)
//              threads (T, 1, 1)
//     for l = bx * T + tx; l < total; l += gridDim.x * T:
//       i_{r-1} = l mod n_{r-1}, l' = l div n_{r-1}, ...   (last dim fastest)
//       body(lb_i + i_i * step_i)
//
// Grid y and z are 1, so their 65,535 limit never applies, and the stride
// loop covers any total. Sequential host nests that touch memory (scf.for,
// scf.if; e.g. a loop over one routing group, whose parallel loop was
// folded away) and lone stores run in a kernel of one thread.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "vmoe/Support/OptionChecks.h"
#include "vmoe/Support/PassOptionChecks.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEGPUMAPPARALLELLOOPSPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

/// Whether `op` is not nested in a kernel or another parallel loop.
static bool isTopLevel(scf::ParallelOp op) {
  return !op->getParentOfType<scf::ParallelOp>() &&
         !op->getParentOfType<gpu::LaunchOp>() &&
         !op->getParentOfType<gpu::GPUFuncOp>();
}

/// Rewrites `loop` into a gpu.launch (see the file comment).
static void mapLoop(IRRewriter &b, scf::ParallelOp loop, int64_t threads,
                    int64_t maxBlocks) {
  Location loc = loop.getLoc();
  b.setInsertionPoint(loop);
  auto cst = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value zero = cst(0), one = cst(1);
  SmallVector<Value> counts;
  Value total = one;
  for (auto [lb, ub, step] : llvm::zip(loop.getLowerBound(),
                                       loop.getUpperBound(), loop.getStep())) {
    Value span = arith::SubIOp::create(b, loc, ub, lb);
    Value count = arith::MaxSIOp::create(
        b, loc, arith::CeilDivSIOp::create(b, loc, span, step), zero);
    counts.push_back(count);
    total = arith::MulIOp::create(b, loc, total, count);
  }
  Value blockSize = cst(threads);
  Value blocks = arith::MinSIOp::create(
      b, loc,
      arith::MaxSIOp::create(
          b, loc, arith::CeilDivSIOp::create(b, loc, total, blockSize), one),
      cst(maxBlocks));
  auto launch = gpu::LaunchOp::create(b, loc, blocks, one, one, blockSize,
                                      one, one);
  Block &body = launch.getBody().front();
  b.setInsertionPointToStart(&body);
  Value start = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, launch.getBlockIds().x, blockSize),
      launch.getThreadIds().x);
  Value stride =
      arith::MulIOp::create(b, loc, launch.getGridSize().x, blockSize);
  auto strideLoop = scf::ForOp::create(b, loc, start, total, stride);
  b.setInsertionPointToStart(strideLoop.getBody());
  IRMapping mapping;
  Value rest = strideLoop.getInductionVar();
  for (int64_t i = loop.getNumLoops() - 1; i >= 0; --i) {
    Value index = rest;
    if (i > 0) {
      index = arith::RemUIOp::create(b, loc, rest, counts[i]);
      rest = arith::DivUIOp::create(b, loc, rest, counts[i]);
    }
    Value iv = arith::AddIOp::create(
        b, loc, loop.getLowerBound()[i],
        arith::MulIOp::create(b, loc, index, loop.getStep()[i]));
    mapping.map(loop.getInductionVars()[i], iv);
  }
  for (Operation &op : loop.getBody()->without_terminator())
    b.clone(op, mapping);
  b.setInsertionPointToEnd(&body);
  gpu::TerminatorOp::create(b, loc);
  b.eraseOp(loop);
}

/// Whether `op` (host code) reads or writes memory in its regions and
/// launches nothing itself.
static bool isSequentialMemoryNest(Operation *op) {
  // A lone store (the fill of a 0-d buffer, say).
  if (isa<memref::StoreOp>(op))
    return true;
  if (op->getNumRegions() == 0 || isa<gpu::LaunchOp>(op))
    return false;
  bool memory = false, launches = false;
  op->walk([&](Operation *inner) {
    if (isa<gpu::LaunchOp>(inner))
      launches = true;
    else if (isa<memref::LoadOp, memref::StoreOp>(inner))
      memory = true;
  });
  return memory && !launches;
}

/// Moves `op` into a gpu.launch of one thread.
static void wrapInOneThread(IRRewriter &b, Operation *op) {
  Location loc = op->getLoc();
  b.setInsertionPoint(op);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto launch = gpu::LaunchOp::create(b, loc, one, one, one, one, one, one);
  Block &body = launch.getBody().front();
  b.setInsertionPointToEnd(&body);
  auto terminator = gpu::TerminatorOp::create(b, loc);
  op->moveBefore(terminator);
}

namespace mlir::vmoe {
namespace {

struct VMoEGPUMapParallelLoopsPass
    : PassWithCheckedOptions<VMoEGPUMapParallelLoopsPass,
                             impl::VMoEGPUMapParallelLoopsPassBase<
                                 VMoEGPUMapParallelLoopsPass>> {
  using PassWithCheckedOptions::PassWithCheckedOptions;

  /// CUDA's limits: 1024 threads per block, 2^31 - 1 blocks in x.
  llvm::Error checkOptions() {
    if (llvm::Error e =
            ::vmoe::checkRange("threads-per-block", threadsPerBlock, 1, 1024))
      return e;
    return ::vmoe::checkRange("max-blocks", maxBlocks, 1, 2147483647);
  }

  void runOnOperation() override {
    if (failed(verifyOptions()))
      return signalPassFailure();
    SmallVector<scf::ParallelOp> loops;
    getOperation().walk([&](scf::ParallelOp loop) {
      if (isTopLevel(loop))
        loops.push_back(loop);
    });
    IRRewriter rewriter(&getContext());
    for (scf::ParallelOp loop : loops) {
      if (loop.getNumReductions() != 0) {
        loop.emitOpError("with reductions has no GPU mapping");
        return signalPassFailure();
      }
      mapLoop(rewriter, loop, threadsPerBlock, maxBlocks);
    }
    // What is left of host code that touches memory is sequential (a
    // parallel loop of one iteration folded to scf.for, say): one thread.
    SmallVector<Operation *> nests;
    for (Block &block : getOperation().getBody())
      for (Operation &op : block)
        if (isSequentialMemoryNest(&op))
          nests.push_back(&op);
    for (Operation *op : nests) {
      if (op->getNumResults() != 0) {
        op->emitOpError("in host code reads memory and has results: it "
                        "cannot move into a GPU kernel");
        return signalPassFailure();
      }
      wrapInOneThread(rewriter, op);
    }
  }
};

} // namespace
} // namespace mlir::vmoe
