//===- JpegImage.h - Decode JPEG images -------------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Decodes a JPEG file with libjpeg-turbo into 8-bit pixels with the model's
// channel count (docs/ModelFormat.md §4), as TensorFlow's decode_image does
// in the original evaluation pipelines: fancy chroma upsampling, and the
// fast integer IDCT unless `precise` (big_vision's decode(precise=True):
// the accurate one, as PIL decodes). Gray or YCbCr/RGB images; gray is
// replicated for a 3-channel model, and a 1-channel model takes gray images
// only; CMYK is refused. Any size within docs/Limits.md. Corrupt and
// truncated files are one-line errors. Internal to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_FORMATS_JPEGIMAGE_H
#define LIB_RUNTIME_FORMATS_JPEGIMAGE_H

#include "DecodedImage.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace vmoe::runtime {

/// Whether `bytes` start like a JPEG file (the SOI marker, then a marker).
bool isJpegData(llvm::StringRef bytes);

/// Decodes the JPEG file `bytes` into `image` with `channels` (1 or 3)
/// channels. Errors are one line without the path ("truncated JPEG file").
llvm::Error decodeJpegImage(llvm::StringRef bytes, int64_t channels,
                            bool precise, DecodedImage &image);

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_FORMATS_JPEGIMAGE_H
