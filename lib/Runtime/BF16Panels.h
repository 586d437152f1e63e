//===- BF16Panels.h - Expert weights as bf16 pair panels --------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Models compiled with --precision=bf16 keep their expert kernels as bf16
// (SPEC §9): the runtime reads the f32 safetensors tensor and rewrites it,
// once at load, into bf16 pair panels (docs/ModelFormat.md §5).
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_RUNTIME_BF16PANELS_H
#define VMOE_RUNTIME_BF16PANELS_H

#include "Formats/Manifest.h"

#include <cstdint>

namespace vmoe::runtime {

/// The bf16 bits of `value`, rounded to nearest even (NaN stays NaN).
uint16_t roundToBF16(float value);

/// Words of `tensor` ([..., K, N]) as bf16 pair panels of its panel width:
/// ceil(N/L) * L * ceil(K/2) per matrix.
int64_t bf16PanelWords(const TensorInfo &tensor);

/// Rewrites the plain f32 `tensor` at `data` in place into bf16 pair
/// panels [..., ceil(N/L), ceil(K/2), L] of 32-bit words, each holding
/// bf16(w[2j, n]) in its low and bf16(w[2j + 1, n]) in its high 16 bits
/// (0 past K and N); the rest of the tensor's region is zeroed.
void packBF16Panels(float *data, const TensorInfo &tensor);

} // namespace vmoe::runtime

#endif // VMOE_RUNTIME_BF16PANELS_H
