//===- ImageFile.h - Read PNG and JPEG image files --------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Reads an image file into memory and decodes it as PNG or JPEG, told apart
// by their signatures (not by the file name). Internal to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_FORMATS_IMAGEFILE_H
#define LIB_RUNTIME_FORMATS_IMAGEFILE_H

#include "DecodedImage.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace vmoe::runtime {

/// Decodes the PNG or JPEG file `path` with `channels` (1 or 3) channels;
/// `precise` selects the accurate JPEG IDCT. Errors read "<path>:
/// <problem>".
llvm::Expected<DecodedImage> readImageFile(llvm::StringRef path,
                                           int64_t channels, bool precise);

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_FORMATS_IMAGEFILE_H
