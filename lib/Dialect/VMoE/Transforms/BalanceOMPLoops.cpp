//===- BalanceOMPLoops.cpp - vmoe-balance-omp-loops -------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// schedule(dynamic) on the short, reduction-free omp.wsloop ops that have
// no schedule (Passes.td says why).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "vmoe/Support/OptionChecks.h"
#include "vmoe/Support/PassOptionChecks.h"

#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEBALANCEOMPLOOPSPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

namespace mlir::vmoe {
namespace {

struct VMoEBalanceOMPLoopsPass
    : PassWithCheckedOptions<
          VMoEBalanceOMPLoopsPass,
          impl::VMoEBalanceOMPLoopsPassBase<VMoEBalanceOMPLoopsPass>> {
  using PassWithCheckedOptions::PassWithCheckedOptions;

  /// An iteration count.
  llvm::Error checkOptions() {
    return ::vmoe::checkAtLeast("max-iterations", maxIterations, 0);
  }

  void runOnOperation() override {
    if (failed(verifyOptions()))
      return signalPassFailure();
    auto dynamic = omp::ClauseScheduleKindAttr::get(
        &getContext(), omp::ClauseScheduleKind::Dynamic);
    getOperation()->walk([&](omp::WsloopOp loop) {
      if (loop.getScheduleKind() || !loop.getReductionVars().empty())
        return;
      std::optional<int64_t> count = iterations(loop);
      if (count && *count > maxIterations)
        return;
      loop.setScheduleKindAttr(dynamic);
    });
  }

  /// The iteration count of `loop` when its bounds and steps are constants.
  static std::optional<int64_t> iterations(omp::WsloopOp loop) {
    auto nest = dyn_cast<omp::LoopNestOp>(loop.getWrappedLoop());
    if (!nest)
      return std::nullopt;
    int64_t count = 1;
    for (auto [lb, ub, step] :
         llvm::zip_equal(nest.getLoopLowerBounds(), nest.getLoopUpperBounds(),
                         nest.getLoopSteps())) {
      std::optional<int64_t> l = getConstantIntValue(lb),
                             u = getConstantIntValue(ub),
                             s = getConstantIntValue(step);
      if (!l || !u || !s || *s <= 0)
        return std::nullopt;
      count *= std::max<int64_t>(0, (*u - *l + *s - 1) / *s);
    }
    return count;
  }
};

} // namespace
} // namespace mlir::vmoe
