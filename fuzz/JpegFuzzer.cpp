//===- JpegFuzzer.cpp - libFuzzer target: JPEG images ---------------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Arbitrary bytes as an image file (seeded with JPEG files) for a 3-channel
// 8x8 model with V-MoE's crop pipeline: decode, area resize of the shorter
// side to 9, central 8x8 crop, value range [-1, 1]; the accurate IDCT for
// inputs of odd length, the fast one (TensorFlow's default) otherwise.
//
//===----------------------------------------------------------------------===//

#include "ImageFuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vmoe::fuzz::fuzzImage(data, size, ".jpg",
                        size % 2 ? "decode(precise=True)|resize_small(9)|"
                                   "central_crop(8)|value_range(-1, 1)"
                                 : "decode|resize_small(9)|central_crop(8)|"
                                   "value_range(-1, 1)");
  return 0;
}
