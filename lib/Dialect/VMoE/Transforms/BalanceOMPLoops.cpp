//===- BalanceOMPLoops.cpp - vmoe-balance-omp-loops -------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// schedule(dynamic) on the short, reduction-free omp.wsloop ops that have
// no schedule and whose iterations may take unequal time: not uniform, not
// sized for the threads (Passes.td says why).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "vmoe/Support/OptionChecks.h"
#include "vmoe/Support/PassOptionChecks.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include <functional>

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
      if (sizedForThreads(loop) || uniformIterations(loop))
        return;
      loop.setScheduleKindAttr(dynamic);
    });
  }

  /// Whether the loop's bounds come from the OpenMP runtime's thread count
  /// (emitBalancedBlocks: as many equal blocks as a multiple of the
  /// threads).
  static bool sizedForThreads(omp::WsloopOp loop) {
    auto nest = dyn_cast<omp::LoopNestOp>(loop.getWrappedLoop());
    if (!nest)
      return false;
    SmallVector<Value> worklist(nest.getLoopUpperBounds());
    DenseSet<Value> seen;
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      if (!seen.insert(v).second)
        continue;
      Operation *def = v.getDefiningOp();
      if (!def)
        continue;
      if (auto call = dyn_cast<func::CallOp>(def))
        if (call.getCallee() == "omp_get_max_threads")
          return true;
      if (def->getNumRegions() == 0)
        llvm::append_range(worklist, def->getOperands());
    }
    return false;
  }

  /// Whether every iteration runs the same code the same number of times:
  /// each loop bound and branch condition inside is defined above the
  /// loop (constants, the model's shapes), not by the iteration's index or
  /// by data it loads; then iterations take the same time and the static
  /// split is balanced.
  static bool uniformIterations(omp::WsloopOp loop) {
    Region &body = loop.getRegion();
    // Defined above the loop, or computed inside from such values and
    // constants by operations without memory effects.
    DenseMap<Value, bool> known;
    std::function<bool(Value)> above = [&](Value v) -> bool {
      if (!body.isAncestor(v.getParentRegion()))
        return true;
      auto it = known.find(v);
      if (it != known.end())
        return it->second;
      Operation *def = v.getDefiningOp();
      bool uniform = def && def->getNumRegions() == 0 &&
                     isMemoryEffectFree(def) &&
                     llvm::all_of(def->getOperands(), above);
      known[v] = uniform;
      return uniform;
    };
    WalkResult result = body.walk([&](Operation *op) {
      if (auto inner = dyn_cast<scf::ForOp>(op))
        return above(inner.getLowerBound()) && above(inner.getUpperBound()) &&
                       above(inner.getStep())
                   ? WalkResult::advance()
                   : WalkResult::interrupt();
      if (auto branch = dyn_cast<scf::IfOp>(op))
        return above(branch.getCondition()) ? WalkResult::advance()
                                            : WalkResult::interrupt();
      if (isa<scf::IndexSwitchOp, scf::WhileOp, CallOpInterface,
              RegionBranchOpInterface>(op) &&
          !isa<scf::ForOp, scf::IfOp, omp::LoopNestOp, memref::AllocaScopeOp>(
              op))
        return WalkResult::interrupt();
      if (op->hasTrait<OpTrait::IsTerminator>() && op->getNumSuccessors())
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    return !result.wasInterrupted();
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
