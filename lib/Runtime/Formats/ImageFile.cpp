//===- ImageFile.cpp - Read PNG and JPEG image files ----------------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "ImageFile.h"

#include "JpegImage.h"
#include "PngImage.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace vmoe::runtime;
using llvm::StringRef;

llvm::Expected<DecodedImage>
vmoe::runtime::readImageFile(StringRef path, int64_t channels, bool precise) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!file)
    return llvm::createStringError(
        path + ": cannot read image: " + file.getError().message());
  StringRef bytes = (*file)->getBuffer();
  DecodedImage image;
  auto decode = [&]() -> llvm::Error {
    if (channels != 1 && channels != 3)
      return llvm::createStringError(
          "the model takes " + llvm::Twine(channels) +
          "-channel images; image input needs 1 (gray) or 3 (RGB)");
    if (isPngData(bytes))
      return decodePngImage(bytes, channels, image);
    if (isJpegData(bytes))
      return decodeJpegImage(bytes, channels, precise, image);
    return llvm::createStringError("not a PNG or JPEG file");
  };
  if (llvm::Error error = decode())
    return llvm::createStringError(path + ": " +
                                   llvm::toString(std::move(error)));
  return image;
}
