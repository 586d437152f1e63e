//===- Patterns.h - Lowering patterns of convert-vmoe-to-scf ----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// One populate function per op family; VMoEToSCF.cpp gathers them.
// Internal to lib/Conversion/VMoEToSCF.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_CONVERSION_VMOETOSCF_PATTERNS_H
#define LIB_CONVERSION_VMOETOSCF_PATTERNS_H

#include "vmoe/Codegen/Microkernel.h"
#include "vmoe/Dialect/VMoE/IR/VMoE.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::vmoe::lowering {

/// route, bpr_sort, capacity.
void populateRouteLoweringPatterns(RewritePatternSet &patterns);

/// dispatch, combine.
void populateDispatchLoweringPatterns(RewritePatternSet &patterns);

/// expert_ffn.
/// `bf16Hidden`: an expert_ffn whose second kernel is stored as bf16 pairs
/// keeps its hidden as a bf16 tensor (the target rounds f32 to bf16 in one
/// instruction: bf16-dot); else an f32 hidden its GEMM rounds.
void populateExpertLoweringPatterns(RewritePatternSet &patterns,
                                    bool bf16Hidden);

/// fused_route (as route, bpr_sort and assign_slots per group).
void populateFusedRouteLoweringPatterns(RewritePatternSet &patterns);

/// fused_experts, with the microkernel register tile `shape`.
void populateFusedExpertsLoweringPatterns(RewritePatternSet &patterns,
                                          const MicrokernelShape &shape);

/// expert_choice and expert_choice_experts (SPEC §8), with the microkernel
/// register tile `shape`.
void populateExpertChoiceLoweringPatterns(RewritePatternSet &patterns,
                                          const MicrokernelShape &shape);

/// soft_moe (SPEC §8), with the microkernel register tile `shape`.
void populateRouterLossesLoweringPatterns(RewritePatternSet &patterns);

void populateSoftMoELoweringPatterns(RewritePatternSet &patterns,
                                     const MicrokernelShape &shape);

/// attention (with bf16 products: one fused loop over images x heads on
/// the pair microkernel of `shape`).
void populateAttentionLoweringPatterns(RewritePatternSet &patterns,
                                       const MicrokernelShape &shape);

/// unpack_panels (a copy from the GEMM panel layout).
void populateUnpackPanelsLoweringPatterns(RewritePatternSet &patterns);

/// Makes every linalg contraction under `root` that reads a
/// vmoe.unpack_panels result as its B operand read the panels in place
/// (the map of PanelLayout.h), when the panel width is a multiple of
/// `lanes`; erases the unpack ops left without users.
void foldUnpackPanelsIntoContractions(Operation *root, int64_t lanes);

/// The capacity rule in IR: rule(k * tokens * ratio / numExperts) in double
/// precision, NaN or <= 0 -> 0, raised to a multiple of `multipleOf`; an
/// index value. `ratio` is an f64 value.
Value buildCapacityValue(OpBuilder &b, Location loc, int64_t k, Value tokens,
                         Value ratio, int64_t numExperts, CapacityRule rule,
                         int64_t multipleOf);

} // namespace mlir::vmoe::lowering

#endif // LIB_CONVERSION_VMOETOSCF_PATTERNS_H
