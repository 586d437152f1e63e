//===- Passes.td - vmoe conversion passes ------------------*- tablegen -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_CONVERSION_PASSES_TD
#define VMOE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertVMoEToSCFPass
    : Pass<"convert-vmoe-to-scf", "::mlir::func::FuncOp"> {
  let summary = "Lower vmoe ops to linalg, scf, tensor, arith and math";
  let description = [{
    Rewrites every vmoe op into upstream tensor-level IR with the exact
    semantics of docs/Dialect.md: linalg contractions and reductions for the
    router and the expert MLPs, `scf.forall` over tokens for top-k and the BPR
    ranks, an `scf.forall` over groups whose sequential body fills the
    buffers choice by choice, and a per-token weighted gather for combine.
    Routing is exact and deterministic: BPR is a rank count (stable, NaN
    ranked last), so its result does not depend on the schedule.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // VMOE_CONVERSION_PASSES_TD
