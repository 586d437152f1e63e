//===- BalanceOMPLoops.cpp - vmoe-balance-omp-loops -------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// schedule(dynamic) on the reduction-free omp.wsloop ops that have no
// schedule (Passes.td says why).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/Dialect/OpenMP/OpenMPDialect.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEBALANCEOMPLOOPSPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

namespace mlir::vmoe {
namespace {

struct VMoEBalanceOMPLoopsPass
    : impl::VMoEBalanceOMPLoopsPassBase<VMoEBalanceOMPLoopsPass> {
  void runOnOperation() override {
    auto dynamic = omp::ClauseScheduleKindAttr::get(
        &getContext(), omp::ClauseScheduleKind::Dynamic);
    getOperation()->walk([&](omp::WsloopOp loop) {
      if (loop.getScheduleKind() || !loop.getReductionVars().empty())
        return;
      loop.setScheduleKindAttr(dynamic);
    });
  }
};

} // namespace
} // namespace mlir::vmoe
