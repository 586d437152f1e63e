//===- JpegImage.cpp - Decode JPEG images ---------------------------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// libjpeg's default error handler calls exit(); here every error, and every
// warning that means lost pixel data, ends with a longjmp to the setjmp in
// decodeJpeg() instead. That function therefore holds no C++ object with a
// destructor, keeps all state libjpeg and its callbacks touch (and the
// pixel buffer) in a plain struct, and modifies no local variable after
// setjmp. The file is decoded from memory (jpeg_mem_src), whose end raises
// the "premature end" warning this reader turns into "truncated". The size
// limits are checked from the header before any pixel memory is allocated;
// the decoder's own memory and the scans of a progressive file are bounded
// too (docs/Limits.md).
//
//===----------------------------------------------------------------------===//

#include "JpegImage.h"

#include "llvm/ADT/Twine.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// jpeglib.h needs size_t and FILE declared first (<cstdio>), and jerror.h
// the configuration jpeglib.h includes: in this order.
#include <jpeglib.h>

#include <jerror.h>

using namespace vmoe::runtime;
using llvm::StringRef;
using llvm::Twine;

/// The most memory libjpeg may allocate for one image (a progressive file
/// keeps all its DCT coefficients: 2 bytes per sample).
static constexpr long kMaxJpegMemory = 1L << 30;

namespace {

/// How decodeJpeg() ended.
enum class DecodeStatus {
  Success,
  /// libjpeg failed or the data is corrupt; JpegDecoder::message says why.
  Failed,
  /// A color image for a 1-channel model.
  WrongColor,
  /// CMYK or another color space without a conversion to RGB.
  UnsupportedColor,
  /// The size in the header is outside docs/Limits.md.
  TooLarge,
};

/// Input, output and callback state of decodeJpeg(). Plain data only:
/// libjpeg's callbacks longjmp across the frames that use it.
struct JpegDecoder {
  struct jpeg_decompress_struct info;
  struct jpeg_error_mgr errors;
  struct jpeg_progress_mgr progress;
  /// Where errors return to.
  std::jmp_buf jump;
  /// Whether `info` holds a created decompressor.
  bool created;
  /// The whole file.
  const unsigned char *data;
  size_t size;
  /// The model's channels, and decode(precise=True).
  int channels;
  bool precise;
  /// Set when the data ended before the image did.
  bool truncated;
  /// Set when libjpeg ran out of its memory budget.
  bool outOfMemory;
  /// From the header.
  JDIMENSION width;
  JDIMENSION height;
  J_COLOR_SPACE colorSpace;
  /// height rows of width * channels bytes (malloc'ed here, freed by the
  /// caller).
  unsigned char *pixels;
  /// libjpeg's message for the failure.
  char message[JMSG_LENGTH_MAX];
};

} // namespace

static JpegDecoder &getDecoder(j_common_ptr info) {
  return *static_cast<JpegDecoder *>(info->client_data);
}

/// libjpeg error callback (instead of exit()): keeps the message and
/// returns to decodeJpeg().
static void onJpegError(j_common_ptr info) {
  JpegDecoder &decoder = getDecoder(info);
  int code = info->err->msg_code;
  decoder.outOfMemory |=
      code == JERR_OUT_OF_MEMORY || code == JERR_NO_BACKING_STORE;
  (*info->err->format_message)(info, decoder.message);
  std::longjmp(decoder.jump, 1);
}

/// libjpeg message callback: warnings that mean lost or wrong pixel data
/// are errors; other warnings (extraneous bytes between markers, an
/// unknown JFIF revision, a bad ICC profile) and trace messages are
/// ignored, as the image data is still valid.
static void onJpegMessage(j_common_ptr info, int level) {
  if (level != -1)
    return;
  switch (info->err->msg_code) {
  case JWRN_JPEG_EOF:
    getDecoder(info).truncated = true;
    onJpegError(info);
    break;
  case JWRN_HIT_MARKER:
  case JWRN_HUFF_BAD_CODE:
  case JWRN_ARITH_BAD_CODE:
  case JWRN_MUST_RESYNC:
    onJpegError(info);
    break;
  default:
    break;
  }
}

/// libjpeg progress callback: stops progressive files with too many scans.
static void onJpegProgress(j_common_ptr info) {
  auto *decompress = reinterpret_cast<j_decompress_ptr>(info);
  if (decompress->input_scan_number <= vmoe::limits::kMaxJpegScans)
    return;
  JpegDecoder &decoder = getDecoder(info);
  std::snprintf(decoder.message, sizeof(decoder.message),
                "more than %d scans (the limit)", vmoe::limits::kMaxJpegScans);
  std::longjmp(decoder.jump, 1);
}

/// Decodes the file in `decoder` into decoder.pixels as 8-bit pixels with
/// decoder.channels channels. No C++ objects live here (see file comment).
static DecodeStatus decodeJpeg(JpegDecoder &decoder) {
  jpeg_decompress_struct &info = decoder.info;
  info.err = jpeg_std_error(&decoder.errors);
  decoder.errors.error_exit = onJpegError;
  decoder.errors.emit_message = onJpegMessage;
  if (setjmp(decoder.jump)) {
    if (decoder.created)
      jpeg_destroy_decompress(&info);
    return DecodeStatus::Failed;
  }
  jpeg_create_decompress(&info);
  decoder.created = true;
  info.client_data = &decoder;
  info.mem->max_memory_to_use = kMaxJpegMemory;
  decoder.progress.progress_monitor = onJpegProgress;
  info.progress = &decoder.progress;
  jpeg_mem_src(&info, decoder.data, decoder.size);
  jpeg_read_header(&info, TRUE);

  decoder.width = info.image_width;
  decoder.height = info.image_height;
  decoder.colorSpace = info.jpeg_color_space;
  DecodeStatus refused = DecodeStatus::Success;
  if (!isImageSizeAllowed(info.image_width, info.image_height))
    refused = DecodeStatus::TooLarge;
  else if (info.jpeg_color_space != JCS_GRAYSCALE &&
           info.jpeg_color_space != JCS_YCbCr &&
           info.jpeg_color_space != JCS_RGB)
    refused = DecodeStatus::UnsupportedColor;
  else if (decoder.channels == 1 && info.jpeg_color_space != JCS_GRAYSCALE)
    refused = DecodeStatus::WrongColor;
  if (refused != DecodeStatus::Success) {
    jpeg_destroy_decompress(&info);
    return refused;
  }

  // TensorFlow's decode_image: fancy upsampling, fast IDCT by default.
  info.out_color_space = decoder.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  info.dct_method = decoder.precise ? JDCT_ISLOW : JDCT_IFAST;
  info.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&info);
  size_t rowBytes = static_cast<size_t>(info.output_width) * decoder.channels;
  if (info.output_width != decoder.width ||
      info.output_height != decoder.height ||
      info.output_components != decoder.channels) {
    std::snprintf(decoder.message, sizeof(decoder.message),
                  "unexpected output format");
    std::longjmp(decoder.jump, 1);
  }
  decoder.pixels =
      static_cast<unsigned char *>(std::malloc(rowBytes * decoder.height));
  if (!decoder.pixels) {
    decoder.outOfMemory = true;
    std::longjmp(decoder.jump, 1);
  }
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = decoder.pixels + info.output_scanline * rowBytes;
    jpeg_read_scanlines(&info, &row, 1);
  }
  // Reads up to the EOI marker, so that a file cut after the last scan is
  // also reported as truncated.
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return DecodeStatus::Success;
}

/// "CMYK", "YCCK", ...: a color space as the error messages name it.
static const char *colorSpaceName(J_COLOR_SPACE space) {
  switch (space) {
  case JCS_GRAYSCALE:
    return "gray";
  case JCS_YCbCr:
    return "color (YCbCr)";
  case JCS_RGB:
    return "color (RGB)";
  case JCS_CMYK:
    return "CMYK";
  case JCS_YCCK:
    return "YCCK";
  default:
    return "unknown color space";
  }
}

bool vmoe::runtime::isJpegData(StringRef bytes) {
  return bytes.starts_with("\xFF\xD8\xFF");
}

llvm::Error vmoe::runtime::decodeJpegImage(StringRef bytes, int64_t channels,
                                           bool precise, DecodedImage &image) {
  // Zeroed, and on the heap: libjpeg's structs are large.
  auto decoder = std::make_unique<JpegDecoder>();
  decoder->data = reinterpret_cast<const unsigned char *>(bytes.data());
  decoder->size = bytes.size();
  decoder->channels = static_cast<int>(channels);
  decoder->precise = precise;
  DecodeStatus status = decodeJpeg(*decoder);
  image.pixels.reset(decoder->pixels);
  switch (status) {
  case DecodeStatus::Success:
    break;
  case DecodeStatus::Failed:
    if (decoder->truncated)
      return llvm::createStringError("truncated JPEG file");
    if (decoder->outOfMemory)
      return llvm::createStringError("the JPEG decoder needs more than " +
                                     Twine(kMaxJpegMemory >> 20) +
                                     " MiB for this file (the limit)");
    return llvm::createStringError("invalid JPEG file: " +
                                   Twine(decoder->message));
  case DecodeStatus::TooLarge:
    return llvm::createStringError(
        checkImageSize(decoder->width, decoder->height));
  case DecodeStatus::UnsupportedColor:
    return llvm::createStringError(
        Twine(colorSpaceName(decoder->colorSpace)) +
        " JPEG images are not supported (gray or color only)");
  case DecodeStatus::WrongColor:
    return llvm::createStringError(Twine(colorSpaceName(decoder->colorSpace)) +
                                   " JPEG image, model expects 1-channel gray");
  }
  image.height = decoder->height;
  image.width = decoder->width;
  image.channels = channels;
  return llvm::Error::success();
}
