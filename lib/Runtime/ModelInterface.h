//===- ModelInterface.h - Symbols a compiled model defines ------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The two functions every model object from vmoe-compile defines
// (docs/ModelFormat.md §5) and the MLIR memref descriptors of the C
// interface (`_mlir_ciface_`) of the forward function. The runtime leaves
// them undefined; the model object linked with it provides them. Internal to
// lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_MODELINTERFACE_H
#define LIB_RUNTIME_MODELINTERFACE_H

#include <cstdint>

namespace vmoe::runtime {

/// A ranked memref as the MLIR C interface passes it: allocated and aligned
/// pointers, offset, sizes and strides (in elements).
template <typename T, int Rank> struct MemRefDescriptor {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];
};

/// Images [N, C, H, W].
using F32x4 = MemRefDescriptor<float, 4>;
/// The weights buffer [weights_size].
using F32x1 = MemRefDescriptor<float, 1>;
/// Logits [N, classes].
using F32x2 = MemRefDescriptor<float, 2>;
/// Routing statistics [L, E + 1].
using I32x2 = MemRefDescriptor<int32_t, 2>;

/// The forward pass of a training graph: vmoe_forward with the losses
/// [L, 3] (means over the batch's groups) after the statistics.
using TrainingForwardFn = void (*)(F32x4 *images, F32x1 *weights,
                                   double capacityRatio, int64_t validImages,
                                   F32x2 *logits, I32x2 *stats, F32x2 *losses);

} // namespace vmoe::runtime

extern "C" {
/// The forward pass of one batch (docs/ModelFormat.md §5).
void _mlir_ciface_vmoe_forward(vmoe::runtime::F32x4 *images,
                               vmoe::runtime::F32x1 *weights,
                               double capacityRatio, int64_t validImages,
                               vmoe::runtime::F32x2 *logits,
                               vmoe::runtime::I32x2 *stats);

/// The manifest of the model: a NUL-terminated JSON string.
const char *vmoe_model_manifest(void);
}

#endif // LIB_RUNTIME_MODELINTERFACE_H
