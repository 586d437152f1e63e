//===- Preprocess.cpp - Image file to model input -------------------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The ops follow TensorFlow's CPU kernels, which the original pipelines run,
// operation by operation in float32 (each product and sum its own statement,
// so that no fused multiply-add changes a rounding):
//
// - resize: ResizeBilinear with half-pixel centers (tf.image.resize,
//   antialias=False): source coordinate (x + 0.5) * in/out - 0.5, clamped
//   neighbours, lerp across then down. Both pipelines cast the result back
//   to the input's type: an 8-bit input (the decoded image, or one resized
//   or cropped from it) gives values clipped to [0, 255] and truncated to
//   integers; a float input (after resize_small) stays float. Same-size
//   resizes copy the image (TensorFlow's shortcut).
// - resize_small: the new size round-half-even(side * S / shorter side) in
//   float32 (tf.round), then ResizeArea (align_corners=False): each output
//   pixel averages the input box [y * in/out, (y + 1) * in/out) with
//   fractional weights at its edges; the float result is kept (V-MoE's
//   resize_small; big_vision's truncates to uint8 after it).
// - central_crop: offsets (in - out) // 2; a view, no copy.
//
// Images stay in their 8-bit buffer until the first resize; every image is
// a view (rows with a stride), so a crop copies nothing.
//
//===----------------------------------------------------------------------===//

#include "Preprocess.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace vmoe;
using namespace vmoe::runtime;
using llvm::Twine;

namespace {

/// An image of T values 0..255: `height` rows of `width` pixels of
/// `channels` interleaved values, rows `rowStride` values apart.
template <typename T> struct View {
  const T *data = nullptr;
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
  int64_t rowStride = 0;

  float at(int64_t y, int64_t x, int64_t c) const {
    return static_cast<float>(data[y * rowStride + x * channels + c]);
  }
};

/// A resampled image.
struct FloatImage {
  std::vector<float> values;
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;

  FloatImage(int64_t height, int64_t width, int64_t channels)
      : values(height * width * channels), height(height), width(width),
        channels(channels) {}

  View<float> view() const {
    return {values.data(), height, width, channels, width * channels};
  }
  float &at(int64_t y, int64_t x, int64_t c) {
    return values[(y * width + x) * channels + c];
  }
};

/// One output coordinate of a bilinear resize: the two source indices and
/// the weight of the upper one.
struct BilinearTap {
  int64_t lower;
  int64_t upper;
  float lerp;
};

/// TensorFlow's compute_interpolation_weights with HalfPixelScaler.
std::vector<BilinearTap> bilinearTaps(int64_t inSize, int64_t outSize) {
  float scale = static_cast<float>(inSize) / static_cast<float>(outSize);
  std::vector<BilinearTap> taps(outSize);
  for (int64_t i = 0; i < outSize; ++i) {
    float centered = static_cast<float>(i) + 0.5f;
    float scaled = centered * scale;
    float in = scaled - 0.5f;
    float inFloor = std::floor(in);
    taps[i].lower = std::max<int64_t>(static_cast<int64_t>(inFloor), 0);
    taps[i].upper =
        std::min<int64_t>(static_cast<int64_t>(std::ceil(in)), inSize - 1);
    taps[i].lerp = in - inFloor;
  }
  return taps;
}

/// a + (b - a) * t, as TensorFlow's compute_lerp computes each step.
float lerp(float a, float b, float t) {
  float difference = b - a;
  float step = difference * t;
  return a + step;
}

/// resize(H, W): bilinear; with `truncate`, clipped and truncated to
/// integers.
template <typename T>
FloatImage resizeBilinear(const View<T> &in, int64_t height, int64_t width,
                          bool truncate) {
  FloatImage out(height, width, in.channels);
  bool same = height == in.height && width == in.width;
  std::vector<BilinearTap> ys = bilinearTaps(in.height, height);
  std::vector<BilinearTap> xs = bilinearTaps(in.width, width);
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      for (int64_t c = 0; c < in.channels; ++c) {
        if (same) {
          out.at(y, x, c) = in.at(y, x, c);
          continue;
        }
        const BilinearTap &ty = ys[y], &tx = xs[x];
        float top = lerp(in.at(ty.lower, tx.lower, c),
                         in.at(ty.lower, tx.upper, c), tx.lerp);
        float bottom = lerp(in.at(ty.upper, tx.lower, c),
                            in.at(ty.upper, tx.upper, c), tx.lerp);
        float value = lerp(top, bottom, ty.lerp);
        out.at(y, x, c) =
            truncate ? std::trunc(std::clamp(value, 0.0f, 255.0f)) : value;
      }
  return out;
}

/// The input cells one output coordinate of an area resize covers: indices
/// [start, end) and the covered fractions of the first and last cell (the
/// others are covered whole). TensorFlow's CachedInterpolation of
/// ResizeArea.
struct AreaSpan {
  int64_t start;
  int64_t end;
  float startScale;
  float endMinusOneScale;
};

/// The covered fraction of cell `v` by the box [in0, in1) of length
/// `scale`, as ResizeArea computes it.
float coveredFraction(int64_t v, float in0, float in1, float scale) {
  float next = static_cast<float>(v + 1);
  if (static_cast<float>(v) < in0)
    return next > in1 ? scale : next - in0;
  return next > in1 ? in1 - static_cast<float>(v) : 1.0f;
}

std::vector<AreaSpan> areaSpans(int64_t outSize, float scale) {
  std::vector<AreaSpan> spans(outSize);
  for (int64_t i = 0; i < outSize; ++i) {
    float in0 = static_cast<float>(i) * scale;
    float in1 = static_cast<float>(i + 1) * scale;
    AreaSpan &span = spans[i];
    span.start = static_cast<int64_t>(std::floor(in0));
    span.end = static_cast<int64_t>(std::ceil(in1));
    span.startScale = coveredFraction(span.start, in0, in1, scale);
    span.endMinusOneScale = coveredFraction(span.end - 1, in0, in1, scale);
  }
  return spans;
}

/// resize_small's area resampling to height x width.
template <typename T>
FloatImage resizeArea(const View<T> &in, int64_t height, int64_t width) {
  FloatImage out(height, width, in.channels);
  float heightScale =
      static_cast<float>(in.height) / static_cast<float>(height);
  float widthScale = static_cast<float>(in.width) / static_cast<float>(width);
  float area = heightScale * widthScale;
  auto scale = static_cast<float>(1.0 / area);
  std::vector<AreaSpan> xs = areaSpans(width, widthScale);
  auto bound = [](int64_t i, int64_t size) {
    return std::clamp<int64_t>(i, 0, size - 1);
  };
  std::vector<float> rowScales;
  for (int64_t y = 0; y < height; ++y) {
    float in0 = static_cast<float>(y) * heightScale;
    float in1 = static_cast<float>(y + 1) * heightScale;
    auto rowStart = static_cast<int64_t>(std::floor(in0));
    auto rowEnd = static_cast<int64_t>(std::ceil(in1));
    rowScales.clear();
    for (int64_t i = rowStart; i < rowEnd; ++i)
      rowScales.push_back(coveredFraction(i, in0, in1, heightScale));
    for (int64_t x = 0; x < width; ++x) {
      const AreaSpan &sx = xs[x];
      for (int64_t c = 0; c < in.channels; ++c) {
        float sum = 0;
        for (int64_t i = rowStart; i < rowEnd; ++i) {
          int64_t row = bound(i, in.height);
          float rowSum =
              in.at(row, bound(sx.start, in.width), c) * sx.startScale;
          if (sx.start + 1 != sx.end) {
            for (int64_t j = sx.start + 1; j < sx.end - 1; ++j)
              rowSum += in.at(row, bound(j, in.width), c);
            float last = in.at(row, bound(sx.end - 1, in.width), c) *
                         sx.endMinusOneScale;
            rowSum += last;
          }
          float weighted = rowSum * rowScales[i - rowStart];
          sum += weighted;
        }
        out.at(y, x, c) = sum * scale;
      }
    }
  }
  return out;
}

/// "WxH": a size as the messages write it (width first).
std::string formatSize(int64_t height, int64_t width) {
  return std::to_string(width) + "x" + std::to_string(height);
}

} // namespace

float vmoe::runtime::normalizePixel(float pixel, const PreprocessSpec &spec,
                                    float mean, float std) {
  float x = pixel / 255.0f;
  if (spec.valueRange) {
    auto [low, high] = *spec.valueRange;
    auto offset = static_cast<float>(low);
    auto range = static_cast<float>(high - low);
    float scaled = x * range;
    x = offset + scaled;
  }
  return (x - mean) / std;
}

llvm::Error vmoe::runtime::preprocessImage(const DecodedImage &image,
                                           const InputFormat &format,
                                           float *pixels) {
  const PreprocessSpec &spec = *format.spec;
  View<uint8_t> bytes{image.pixels.get(), image.height, image.width,
                      image.channels, image.width * image.channels};
  // The image so far: `bytes` until the first resize, then `floats` (a view
  // of `storage`).
  View<float> floats;
  std::vector<FloatImage> storage;
  bool resampled = false;
  // Whether the original pipeline holds the image as uint8 here: from
  // decode on, until resize_small makes floats.
  bool eightBit = true;
  auto withView = [&](auto function) {
    return resampled ? function(floats) : function(bytes);
  };
  auto keep = [&](FloatImage next) {
    storage.clear();
    storage.push_back(std::move(next));
    floats = storage.back().view();
    resampled = true;
  };
  std::string after; // " (after <op>)" once an op ran, for messages
  for (const GeometryOp &op : spec.geometry) {
    int64_t height = withView([](auto &v) { return v.height; });
    int64_t width = withView([](auto &v) { return v.width; });
    switch (op.kind) {
    case GeometryOp::Kind::Resize:
      keep(withView([&](auto &v) {
        return resizeBilinear(v, op.height, op.width, eightBit);
      }));
      break;
    case GeometryOp::Kind::ResizeSmall: {
      float ratio = static_cast<float>(op.height) /
                    static_cast<float>(std::min(height, width));
      float newHeight = static_cast<float>(height) * ratio;
      float newWidth = static_cast<float>(width) * ratio;
      auto h = static_cast<int64_t>(std::nearbyint(newHeight));
      auto w = static_cast<int64_t>(std::nearbyint(newWidth));
      std::string tooLarge = checkImageSize(w, h);
      if (!tooLarge.empty())
        return llvm::createStringError(op.text + " of " +
                                       formatSize(height, width) + " pixels" +
                                       after + " makes " + tooLarge);
      keep(withView([&](auto &v) { return resizeArea(v, h, w); }));
      eightBit = false;
      break;
    }
    case GeometryOp::Kind::CentralCrop: {
      if (height < op.height || width < op.width)
        return llvm::createStringError(op.text + ": the image has " +
                                       formatSize(height, width) + " pixels" +
                                       after + ", fewer than " +
                                       formatSize(op.height, op.width));
      int64_t dy = (height - op.height) / 2, dx = (width - op.width) / 2;
      withView([&](auto &v) {
        v.data += dy * v.rowStride + dx * v.channels;
        v.height = op.height;
        v.width = op.width;
        return 0;
      });
      break;
    }
    }
    after = " (after " + op.text + ")";
  }

  int64_t height = withView([](auto &v) { return v.height; });
  int64_t width = withView([](auto &v) { return v.width; });
  if (height != format.height || width != format.width)
    return llvm::createStringError(formatSize(height, width) +
                                   " pixels, model expects " +
                                   formatSize(format.height, format.width));
  int64_t plane = height * width;
  withView([&](auto &v) {
    for (int64_t c = 0; c < format.channels; ++c)
      for (int64_t y = 0; y < height; ++y)
        for (int64_t x = 0; x < width; ++x)
          pixels[c * plane + y * width + x] = normalizePixel(
              v.at(y, x, c), spec, format.mean[c], format.std[c]);
    return 0;
  });
  return llvm::Error::success();
}
