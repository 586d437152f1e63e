//===- PngFuzzer.cpp - libFuzzer target: PNG images -----------------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Arbitrary bytes as an image file (seeded with PNG files) for a 3-channel
// 8x8 model with the default pipeline: decode, bilinear resize to 8x8.
//
//===----------------------------------------------------------------------===//

#include "ImageFuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vmoe::fuzz::fuzzImage(data, size, ".png", "decode|resize(8)");
  return 0;
}
