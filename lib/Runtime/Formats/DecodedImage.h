//===- DecodedImage.h - Pixels of a decoded image file ----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// What the PNG and JPEG readers produce: 8-bit pixels with the model's
// channel count (1 gray or 3 RGB), rows top to bottom, channels
// interleaved, and the size limits every decoded image is held to
// (docs/Limits.md). Internal to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_FORMATS_DECODEDIMAGE_H
#define LIB_RUNTIME_FORMATS_DECODEDIMAGE_H

#include "vmoe/Support/Limits.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

namespace vmoe::runtime {

/// Frees memory from std::malloc.
struct FreeDeleter {
  void operator()(void *pointer) const { std::free(pointer); }
};

/// A decoded image.
struct DecodedImage {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
  /// height * width * channels bytes. Allocated with std::malloc by the C
  /// code that libpng and libjpeg longjmp across (and not zeroed: a large
  /// image that fails early costs no page faults).
  std::unique_ptr<uint8_t[], FreeDeleter> pixels;
};

/// Whether a `width` x `height` image is within the limits (plain code,
/// for the decoders' longjmp regions).
inline bool isImageSizeAllowed(int64_t width, int64_t height) {
  return width >= 1 && height >= 1 && width <= limits::kMaxImageSide &&
         height <= limits::kMaxImageSide &&
         width * height <= limits::kMaxImagePixels;
}

/// Empty when a `width` x `height` image is within the limits, else the
/// problem: "70000x2 pixels, above the limit of 65535 per side".
inline std::string checkImageSize(int64_t width, int64_t height) {
  std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (width < 1 || height < 1)
    return size + " pixels: an empty image";
  if (width > limits::kMaxImageSide || height > limits::kMaxImageSide)
    return size + " pixels, above the limit of " +
           std::to_string(limits::kMaxImageSide) + " per side";
  if (width * height > limits::kMaxImagePixels)
    return size + " pixels, above the limit of " +
           std::to_string(limits::kMaxImagePixels) + " pixels";
  return {};
}

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_FORMATS_DECODEDIMAGE_H
