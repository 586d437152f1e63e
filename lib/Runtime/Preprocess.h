//===- Preprocess.h - Image file to model input -----------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The evaluation preprocessing of big_vision and V-MoE on a decoded image
// (docs/ModelFormat.md §4): the resizes and crops of a PreprocessSpec
// (vmoe/Support/PreprocessSpec.h), computed as TensorFlow computes them,
// then the normalization into the model's channel-major float input.
// Internal to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_PREPROCESS_H
#define LIB_RUNTIME_PREPROCESS_H

#include "Formats/DecodedImage.h"

#include "vmoe/Support/PreprocessSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>

namespace vmoe::runtime {

/// The input image a model expects.
struct InputFormat {
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  /// One value per channel.
  llvm::ArrayRef<float> mean;
  llvm::ArrayRef<float> std;
  /// The preprocessing ops.
  const PreprocessSpec *spec = nullptr;
};

/// The model input for pixel value `pixel` (0..255; fractional after area
/// resampling) of a channel with `mean` and `std`, all in float32 and in
/// this order: x = pixel / 255; with value_range(a, b), x = a + x * (b - a)
/// (big_vision's formula: a and b - a rounded to float32 from the spec's
/// doubles); then (x - mean) / std. The padding images of a batch are all
/// zero after this.
float normalizePixel(float pixel, const PreprocessSpec &spec, float mean,
                     float std);

/// Applies `format.spec`'s resizes and crops to `image` (whose channels are
/// format.channels) and writes the normalized result, format.channels x
/// height x width floats channel-major, to `pixels`. Errors are one line
/// without the path.
llvm::Error preprocessImage(const DecodedImage &image,
                            const InputFormat &format, float *pixels);

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_PREPROCESS_H
