//===- PngImage.h - Read PNG images as model input --------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Decodes a PNG file with libpng and converts it to the model's input layout
// and normalization (docs/ModelFormat.md §4): 8- or 16-bit (scaled to 8),
// gray, gray+alpha, RGB, RGBA or palette; alpha dropped; gray replicated for
// a 3-channel model; a 1-channel model takes gray images only. Corrupt and
// truncated files are one-line errors. Internal to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_FORMATS_PNGIMAGE_H
#define LIB_RUNTIME_FORMATS_PNGIMAGE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>

namespace vmoe::runtime {

/// The input image a model expects.
struct ImageFormat {
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  /// One value per channel.
  llvm::ArrayRef<float> mean;
  llvm::ArrayRef<float> std;
};

/// The model input for raw 8-bit value `pixel` of a channel with `mean` and
/// `std`: x = (float)p / 255, then (x - mean) / std, in float32 and in this
/// order (the padding images of a batch use pixel 0).
inline float normalizePixel(uint8_t pixel, float mean, float std) {
  float x = static_cast<float>(pixel) / 255.0f;
  return (x - mean) / std;
}

/// Reads the PNG file `path` into `pixels` (format.channels x height x width
/// floats, channel-major), normalized. Errors read "<path>: <problem>".
llvm::Error readPngImage(llvm::StringRef path, const ImageFormat &format,
                         float *pixels);

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_FORMATS_PNGIMAGE_H
