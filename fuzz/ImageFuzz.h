//===- ImageFuzz.h - Fuzz one image file through the runtime ----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// What Model::readImage does with a file, for the image fuzz targets:
// decode it (PNG or JPEG, whichever its bytes are) for a 3-channel 8x8 model
// input and run a preprocessing pipeline on it. Errors are expected; a
// crash, leak, sanitizer report or timeout is a finding.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_FUZZ_IMAGEFUZZ_H
#define VMOE_FUZZ_IMAGEFUZZ_H

#include "FuzzFile.h"

#include "Formats/ImageFile.h"
#include "Preprocess.h"

#include <cstdlib>
#include <vector>

namespace vmoe::fuzz {

/// Reads `data` as an image file and preprocesses it with `pipeline` (a
/// valid `preprocess` string for an 8x8 input).
inline void fuzzImage(const uint8_t *data, size_t size, const char *suffix,
                      const char *pipeline) {
  static const float mean[] = {0.5f, 0.5f, 0.5f};
  static const float std[] = {0.25f, 0.25f, 0.25f};
  llvm::Expected<PreprocessSpec> spec = parsePreprocess(pipeline);
  if (!spec)
    std::abort();
  runtime::InputFormat format;
  format.channels = 3;
  format.height = 8;
  format.width = 8;
  format.mean = mean;
  format.std = std;
  format.spec = &*spec;
  const std::string &path = writeFuzzFile(data, size, suffix);
  llvm::Expected<runtime::DecodedImage> image =
      runtime::readImageFile(path, format.channels, spec->precise);
  if (!image) {
    llvm::consumeError(image.takeError());
    return;
  }
  std::vector<float> pixels(3 * 8 * 8);
  llvm::consumeError(runtime::preprocessImage(*image, format, pixels.data()));
}

} // namespace vmoe::fuzz

#endif // VMOE_FUZZ_IMAGEFUZZ_H
