//===- Safetensors.h - Load model weights from safetensors ------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Reads a safetensors file (8-byte little-endian header length, JSON header,
// data) and copies each tensor the manifest lists into the flat weights
// buffer at its manifest offset (docs/ModelFormat.md §3). The file must hold
// exactly the manifest's tensors, each F32 or BF16 (widened exactly to f32)
// with the manifest's shapes; every violation is reported in one line naming
// the file and the tensor. Internal to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_FORMATS_SAFETENSORS_H
#define LIB_RUNTIME_FORMATS_SAFETENSORS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace vmoe::runtime {

struct Manifest;

/// Largest JSON header accepted, in bytes (the limit of the reference
/// implementation).
constexpr uint64_t kMaxSafetensorsHeaderSize = 100'000'000;

/// Copies the tensors of the safetensors file `path` into `weights`, which
/// holds `manifest.weightsSize` floats, reading by offset. With `ranks` > 1,
/// of each expert sharded tensor only the rows (experts) of rank `rank` are
/// read; the rest of the tensor is left untouched. Errors read "<path>:
/// <problem>".
llvm::Error loadSafetensors(llvm::StringRef path, const Manifest &manifest,
                            float *weights, int rank = 0, int ranks = 1);

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_FORMATS_SAFETENSORS_H
