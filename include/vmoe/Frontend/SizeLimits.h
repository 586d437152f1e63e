//===- SizeLimits.h - Limits on sizes derived from descriptions -*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The checks of SPEC §11 on sizes that follow from a model description and
// the build options (tokens, weights, activations, capacities), against the
// limits of vmoe/Support/Limits.h. Each error is one line naming the field,
// the value and the limit.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_FRONTEND_SIZELIMITS_H
#define VMOE_FRONTEND_SIZELIMITS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace mlir::vmoe::frontend {

struct BuildOptions;
struct ModelDescription;

/// A capacity ratio given as `field` (a description field or an option):
/// finite, > 0 and at most limits::kMaxCapacityRatio.
llvm::Error checkCapacityRatio(llvm::StringRef field, double ratio);

/// Tokens per image, per routing group and per patch vector are within
/// limits::kMaxDimension. Run before anything multiplies them further.
llvm::Error checkTokenCounts(const ModelDescription &model);

/// Every weight tensor within limits::kMaxTensorElements, all of them within
/// limits::kMaxTotalWeights.
llvm::Error checkWeightSizes(const ModelDescription &model);

/// The batch, capacities and the largest activation tensors of the compiled
/// model within the limits.
llvm::Error checkBuildSizes(const ModelDescription &model,
                            const BuildOptions &options);

} // namespace mlir::vmoe::frontend

#endif // VMOE_FRONTEND_SIZELIMITS_H
