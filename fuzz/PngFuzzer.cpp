//===- PngFuzzer.cpp - libFuzzer target: PNG images -----------------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// readPngImage() on arbitrary bytes, for a 3-channel 8x8 model input.
//
//===----------------------------------------------------------------------===//

#include "FuzzFile.h"

#include "Formats/PngImage.h"

#include <vector>

using namespace vmoe::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const float mean[] = {0.5f, 0.5f, 0.5f};
  static const float std[] = {0.25f, 0.25f, 0.25f};
  ImageFormat format;
  format.channels = 3;
  format.height = 8;
  format.width = 8;
  format.mean = mean;
  format.std = std;
  const std::string &path = vmoe::fuzz::writeFuzzFile(data, size, ".png");
  std::vector<float> pixels(3 * 8 * 8);
  llvm::consumeError(readPngImage(path, format, pixels.data()));
  return 0;
}
