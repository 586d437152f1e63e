//===- ParallelLinalg.cpp - vmoe-parallel-linalg ----------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Large linalg ops on buffers -> an scf.parallel over chunks of their first
// parallel dim around the op on subviews (Passes.td says why and when).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "vmoe/Support/Limits.h"
#include "vmoe/Support/OptionChecks.h"
#include "vmoe/Support/PassOptionChecks.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEPARALLELLINALGPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

/// The dim to split `op` along: the first parallel dim of static size >= 2
/// with only parallel dims of static size before it.
static std::optional<unsigned> splitDim(linalg::LinalgOp op) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  for (unsigned d = 0; d < ranges.size(); ++d) {
    if (iterators[d] != utils::IteratorType::parallel ||
        ShapedType::isDynamic(ranges[d]))
      return std::nullopt;
    if (ranges[d] >= 2)
      return d;
  }
  return std::nullopt;
}

namespace mlir::vmoe {
namespace {

struct VMoEParallelLinalgPass
    : PassWithCheckedOptions<
          VMoEParallelLinalgPass,
          impl::VMoEParallelLinalgPassBase<VMoEParallelLinalgPass>> {
  using PassWithCheckedOptions::PassWithCheckedOptions;

  /// Chunks split a dimension (a size, vmoe-C1); work is a product of
  /// sizes.
  llvm::Error checkOptions() {
    if (llvm::Error e = ::vmoe::checkRange("chunks", chunks, 1,
                                           ::vmoe::limits::kMaxDimension))
      return e;
    return ::vmoe::checkAtLeast("min-work", minWork, 1);
  }

  void runOnOperation() override {
    if (failed(verifyOptions()))
      return signalPassFailure();
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics() && !inParallelLoop(op) &&
          isLarge(op) && splitDim(op))
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : ops) {
      unsigned dim = *splitDim(op);
      int64_t size = op.getStaticLoopRanges()[dim];
      SmallVector<int64_t> tileSizes(dim + 1, 0);
      tileSizes[dim] = (size + chunks - 1) / chunks;
      linalg::LinalgTilingOptions options;
      options.setTileSizes(tileSizes);
      options.setLoopType(linalg::LinalgTilingLoopType::ParallelLoops);
      rewriter.setInsertionPoint(op);
      if (failed(linalg::tileLinalgOp(rewriter, op, options))) {
        op.emitError("vmoe-parallel-linalg: could not split this op");
        return signalPassFailure();
      }
      rewriter.eraseOp(op);
    }
  }

  static bool inParallelLoop(Operation *op) {
    return op->getParentOfType<scf::ParallelOp>() ||
           op->getParentOfType<scf::ForallOp>() ||
           op->getParentOfType<omp::WsloopOp>();
  }

  bool isLarge(linalg::LinalgOp op) const {
    int64_t work = 1;
    for (int64_t range : op.getStaticLoopRanges()) {
      if (ShapedType::isDynamic(range))
        return false;
      work *= range;
      if (work >= minWork)
        return true;
    }
    return work >= minWork;
  }
};

} // namespace
} // namespace mlir::vmoe
