//===- PngImage.cpp - Read PNG images as model input ----------------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// libpng reports errors by longjmp to the setjmp in decodePng(). That
// function therefore holds no C++ object with a destructor, keeps every
// piece of state libpng's callbacks touch in a plain struct, and modifies no
// local variable after setjmp. The file is read into memory first (so that
// "missing" and "truncated" are told apart cleanly) and fed to libpng through
// a read callback that refuses to run past its end.
//
//===----------------------------------------------------------------------===//

#include "PngImage.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/MemoryBuffer.h"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace vmoe::runtime;
using llvm::StringRef;
using llvm::Twine;

namespace {

/// How decodePng() ended.
enum class DecodeStatus {
  Success,
  /// libpng failed; PngDecoder::message says why.
  LibpngError,
  /// The size in the header differs from the model's.
  WrongSize,
  /// A color image for a 1-channel model.
  WrongColor,
};

/// Input, output and callback state of decodePng(). Plain data only: libpng
/// longjmps across the frames that use it.
struct PngDecoder {
  /// The whole file and the read position.
  const unsigned char *data;
  size_t size;
  size_t position;
  /// The model's image format.
  int channels;
  png_uint_32 height;
  png_uint_32 width;
  /// `height` rows of width * channels bytes, filled by decodePng().
  png_bytep *rows;
  /// Set by the read callback when the file ends too early.
  bool truncated;
  /// From the PNG header.
  png_uint_32 fileWidth;
  png_uint_32 fileHeight;
  int colorType;
  /// The last libpng error message.
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

/// Decodes the file in `decoder` into decoder.rows as 8-bit pixels with
/// decoder.channels channels. No C++ objects live here (see file comment).
static DecodeStatus decodePng(PngDecoder &decoder) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &decoder,
                                           onPngError, onPngWarning);
  if (!png) {
    std::snprintf(decoder.message, sizeof(decoder.message),
                  "cannot initialize libpng");
    return DecodeStatus::LibpngError;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(decoder.message, sizeof(decoder.message),
                  "cannot initialize libpng");
    return DecodeStatus::LibpngError;
  }
  // `png` and `info` are not modified after this point, so they keep their
  // values when libpng longjmps back here.
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return DecodeStatus::LibpngError;
  }
  png_set_read_fn(png, &decoder, readPngBytes);
  png_read_info(png, info);

  int bitDepth = 0;
  int colorType = 0;
  png_get_IHDR(png, info, &decoder.fileWidth, &decoder.fileHeight, &bitDepth,
               &colorType, nullptr, nullptr, nullptr);
  decoder.colorType = colorType;
  if (decoder.fileWidth != decoder.width ||
      decoder.fileHeight != decoder.height) {
    png_destroy_read_struct(&png, &info, nullptr);
    return DecodeStatus::WrongSize;
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
  if (png_get_channels(png, info) != decoder.channels ||
      png_get_bit_depth(png, info) != 8 ||
      png_get_rowbytes(png, info) !=
          static_cast<size_t>(decoder.width) * decoder.channels)
    png_error(png, "unsupported pixel format");

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

llvm::Error vmoe::runtime::readPngImage(StringRef path,
                                        const ImageFormat &format,
                                        float *pixels) {
  auto fail = [&](const Twine &message) {
    return llvm::createStringError(path + ": " + message);
  };
  if (format.channels != 1 && format.channels != 3)
    return fail("the model takes " + Twine(format.channels) +
                "-channel images; PNG input needs 1 (gray) or 3 (RGB)");
  if (static_cast<int64_t>(format.mean.size()) != format.channels ||
      static_cast<int64_t>(format.std.size()) != format.channels ||
      format.height < 1 || format.width < 1 || format.height > (1 << 24) ||
      format.width > (1 << 24))
    return fail("invalid image format");

  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!file)
    return fail("cannot read image: " + file.getError().message());
  StringRef bytes = (*file)->getBuffer();
  const auto *data = reinterpret_cast<const unsigned char *>(bytes.data());
  if (bytes.size() < 8 || png_sig_cmp(data, 0, 8) != 0)
    return fail("not a PNG file");

  size_t rowBytes = static_cast<size_t>(format.width) * format.channels;
  std::vector<unsigned char> decoded(rowBytes * format.height);
  std::vector<png_bytep> rows(format.height);
  for (int64_t row = 0; row < format.height; ++row)
    rows[row] = decoded.data() + row * rowBytes;

  PngDecoder decoder = {};
  decoder.data = data;
  decoder.size = bytes.size();
  decoder.channels = static_cast<int>(format.channels);
  decoder.height = static_cast<png_uint_32>(format.height);
  decoder.width = static_cast<png_uint_32>(format.width);
  decoder.rows = rows.data();
  switch (decodePng(decoder)) {
  case DecodeStatus::Success:
    break;
  case DecodeStatus::LibpngError:
    if (decoder.truncated)
      return fail("truncated PNG file");
    return fail("corrupt PNG file: " + Twine(decoder.message));
  case DecodeStatus::WrongSize:
    return fail(Twine(decoder.fileWidth) + "x" + Twine(decoder.fileHeight) +
                " pixels, model expects " + Twine(format.width) + "x" +
                Twine(format.height));
  case DecodeStatus::WrongColor:
    return fail(Twine(colorTypeName(decoder.colorType)) +
                " image, model expects 1-channel gray");
  }

  // Interleaved rows to channel-major, normalized.
  int64_t planeSize = format.height * format.width;
  for (int64_t c = 0; c < format.channels; ++c)
    for (int64_t i = 0; i < planeSize; ++i)
      pixels[c * planeSize + i] = normalizePixel(
          decoded[i * format.channels + c], format.mean[c], format.std[c]);
  return llvm::Error::success();
}
