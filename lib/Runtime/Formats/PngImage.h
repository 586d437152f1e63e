//===- PngImage.h - Decode PNG images ---------------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Decodes a PNG file with libpng into 8-bit pixels with the model's channel
// count (docs/ModelFormat.md §4): 8- or 16-bit (scaled to 8), gray,
// gray+alpha, RGB, RGBA or palette; alpha dropped; gray replicated for a
// 3-channel model; a 1-channel model takes gray images only. Any size
// within docs/Limits.md. Corrupt and truncated files are one-line errors.
// Internal to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_FORMATS_PNGIMAGE_H
#define LIB_RUNTIME_FORMATS_PNGIMAGE_H

#include "DecodedImage.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace vmoe::runtime {

/// Whether `bytes` start with the PNG signature.
bool isPngData(llvm::StringRef bytes);

/// Decodes the PNG file `bytes` into `image` with `channels` (1 or 3)
/// channels. Errors are one line without the path ("truncated PNG file").
llvm::Error decodePngImage(llvm::StringRef bytes, int64_t channels,
                           DecodedImage &image);

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_FORMATS_PNGIMAGE_H
