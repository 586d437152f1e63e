//===- PngImage.cpp - Decode PNG images -----------------------------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// libpng reports errors by longjmp to the setjmp in decodePng(). That
// function therefore holds no C++ object with a destructor, keeps every
// piece of state libpng's callbacks touch (and the buffers it allocates) in
// a plain struct, and modifies no local variable after setjmp. The file is
// in memory (so that "missing" and "truncated" are told apart cleanly) and
// fed to libpng through a read callback that refuses to run past its end.
// The size limits are checked from the header, before any pixel memory is
// allocated.
//
//===----------------------------------------------------------------------===//

#include "PngImage.h"

#include "llvm/ADT/Twine.h"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace vmoe::runtime;
using llvm::StringRef;
using llvm::Twine;

namespace {

/// How decodePng() ended.
enum class DecodeStatus {
  Success,
  /// libpng failed; PngDecoder::message says why.
  Failed,
  /// A color image for a 1-channel model.
  WrongColor,
  /// The size in the header is outside docs/Limits.md.
  TooLarge,
};

/// Input, output and callback state of decodePng(). Plain data only: libpng
/// longjmps across the frames that use it.
struct PngDecoder {
  /// The whole file and the read position.
  const unsigned char *data;
  size_t size;
  size_t position;
  /// The model's channels.
  int channels;
  /// Set by the read callback when the file ends too early.
  bool truncated;
  /// From the PNG header.
  png_uint_32 width;
  png_uint_32 height;
  int colorType;
  /// height rows of width * channels bytes (malloc'ed here, freed by the
  /// caller), and the row pointers into them.
  unsigned char *pixels;
  png_bytep *rows;
  /// The last libpng error message, or why the image is refused.
  char message[256];
};

} // namespace

/// libpng error callback: keeps the message and returns to decodePng().
static void onPngError(png_structp png, png_const_charp message) {
  auto *decoder = static_cast<PngDecoder *>(png_get_error_ptr(png));
  std::snprintf(decoder->message, sizeof(decoder->message), "%s",
                message ? message : "unknown error");
  png_longjmp(png, 1);
}

/// libpng warning callback: warnings (e.g. a bad ancillary chunk) are
/// ignored, as the image data is still valid.
static void onPngWarning(png_structp, png_const_charp) {}

/// libpng read callback over the in-memory file.
static void readPngBytes(png_structp png, png_bytep out, size_t length) {
  auto *decoder = static_cast<PngDecoder *>(png_get_io_ptr(png));
  if (length > decoder->size - decoder->position) {
    decoder->truncated = true;
    png_error(png, "unexpected end of file");
  }
  std::memcpy(out, decoder->data + decoder->position, length);
  decoder->position += length;
}

/// Decodes the file in `decoder` into decoder.pixels as 8-bit pixels with
/// decoder.channels channels. No C++ objects live here (see file comment).
static DecodeStatus decodePng(PngDecoder &decoder) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &decoder,
                                           onPngError, onPngWarning);
  if (!png) {
    std::snprintf(decoder.message, sizeof(decoder.message),
                  "corrupt PNG file: cannot initialize libpng");
    return DecodeStatus::Failed;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(decoder.message, sizeof(decoder.message),
                  "corrupt PNG file: cannot initialize libpng");
    return DecodeStatus::Failed;
  }
  // `png` and `info` are not modified after this point, so they keep their
  // values when libpng longjmps back here.
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    if (decoder.truncated)
      std::snprintf(decoder.message, sizeof(decoder.message),
                    "truncated PNG file");
    else {
      char libpngMessage[sizeof(decoder.message)];
      std::memcpy(libpngMessage, decoder.message, sizeof(libpngMessage));
      std::snprintf(decoder.message, sizeof(decoder.message),
                    "corrupt PNG file: %.200s", libpngMessage);
    }
    return DecodeStatus::Failed;
  }
  png_set_read_fn(png, &decoder, readPngBytes);
  png_read_info(png, info);

  int bitDepth = 0;
  int colorType = 0;
  png_get_IHDR(png, info, &decoder.width, &decoder.height, &bitDepth,
               &colorType, nullptr, nullptr, nullptr);
  decoder.colorType = colorType;
  if (!isImageSizeAllowed(decoder.width, decoder.height)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return DecodeStatus::TooLarge;
  }
  bool isGray = (colorType & PNG_COLOR_MASK_COLOR) == 0;
  if (decoder.channels == 1 && !isGray) {
    png_destroy_read_struct(&png, &info, nullptr);
    return DecodeStatus::WrongColor;
  }

  // To 8-bit gray or RGB without alpha: palette (and its tRNS) expanded,
  // low bit depths expanded, 16 bits scaled, alpha dropped.
  if (colorType == PNG_COLOR_TYPE_PALETTE)
    png_set_palette_to_rgb(png);
  if (isGray && bitDepth < 8)
    png_set_expand_gray_1_2_4_to_8(png);
  if (bitDepth == 16)
    png_set_scale_16(png);
  png_set_strip_alpha(png);
  if (decoder.channels == 3 && isGray)
    png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  size_t rowBytes = static_cast<size_t>(decoder.width) * decoder.channels;
  if (png_get_channels(png, info) != decoder.channels ||
      png_get_bit_depth(png, info) != 8 ||
      png_get_rowbytes(png, info) != rowBytes)
    png_error(png, "unsupported pixel format");

  decoder.pixels =
      static_cast<unsigned char *>(std::malloc(rowBytes * decoder.height));
  decoder.rows =
      static_cast<png_bytep *>(std::malloc(sizeof(png_bytep) * decoder.height));
  if (!decoder.pixels || !decoder.rows)
    png_error(png, "out of memory");
  for (png_uint_32 row = 0; row < decoder.height; ++row)
    decoder.rows[row] = decoder.pixels + row * rowBytes;
  png_read_image(png, decoder.rows);
  // Reads up to IEND, so that a file cut after the image data is also
  // reported as truncated.
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return DecodeStatus::Success;
}

/// "RGB", "gray+alpha", ...: the color type as the error messages name it.
static const char *colorTypeName(int colorType) {
  switch (colorType) {
  case PNG_COLOR_TYPE_GRAY:
    return "gray";
  case PNG_COLOR_TYPE_GRAY_ALPHA:
    return "gray+alpha";
  case PNG_COLOR_TYPE_RGB:
    return "RGB";
  case PNG_COLOR_TYPE_RGB_ALPHA:
    return "RGBA";
  case PNG_COLOR_TYPE_PALETTE:
    return "palette";
  default:
    return "unknown color type";
  }
}

bool vmoe::runtime::isPngData(StringRef bytes) {
  return bytes.size() >= 8 &&
         png_sig_cmp(reinterpret_cast<png_const_bytep>(bytes.data()), 0, 8) ==
             0;
}

llvm::Error vmoe::runtime::decodePngImage(StringRef bytes, int64_t channels,
                                          DecodedImage &image) {
  PngDecoder decoder = {};
  decoder.data = reinterpret_cast<const unsigned char *>(bytes.data());
  decoder.size = bytes.size();
  decoder.channels = static_cast<int>(channels);
  DecodeStatus status = decodePng(decoder);
  std::free(decoder.rows);
  image.pixels.reset(decoder.pixels);
  switch (status) {
  case DecodeStatus::Success:
    break;
  case DecodeStatus::Failed:
    return llvm::createStringError(Twine(decoder.message));
  case DecodeStatus::TooLarge:
    return llvm::createStringError(
        checkImageSize(decoder.width, decoder.height));
  case DecodeStatus::WrongColor:
    return llvm::createStringError(Twine(colorTypeName(decoder.colorType)) +
                                   " image, model expects 1-channel gray");
  }
  image.height = decoder.height;
  image.width = decoder.width;
  image.channels = channels;
  return llvm::Error::success();
}
