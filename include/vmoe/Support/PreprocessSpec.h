//===- PreprocessSpec.h - Image preprocessing of a model --------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The `preprocess` string of a model description and of a compiled model's
// manifest (docs/ModelFormat.md §4): the evaluation ops of big_vision and
// V-MoE that turn an image file into the model's input, in their syntax,
//
//   decode|resize_small(256)|central_crop(224)|value_range(-1, 1)
//
// parsePreprocess() reads such a string (ops joined by '|', each a name with
// Python-style positional and keyword arguments) and checks each op's
// arguments; checkPreprocess() checks a pipeline against a model's image
// (channels, and that every image it makes has the model's size). The front
// end and the runtime use both, so a description the compiler accepts is a
// manifest the runtime accepts. The ops themselves run in
// lib/Runtime/Preprocess.cpp.
//
// Header-only and LLVMSupport-only so that the runtime of compiled models,
// which links no vmoe library, can use it.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_SUPPORT_PREPROCESSSPEC_H
#define VMOE_SUPPORT_PREPROCESSSPEC_H

#include "vmoe/Support/Limits.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

namespace vmoe {

/// A resize or crop of the pipeline.
struct GeometryOp {
  enum class Kind {
    /// resize(S) or resize(H, W): bilinear (tf.image.resize, half-pixel
    /// centers, no antialiasing), then truncated to 8 bits.
    Resize,
    /// resize_small(S): the shorter side to S (`height`), the aspect ratio
    /// kept; area resampling (tf.image.resize_area).
    ResizeSmall,
    /// central_crop(S) or central_crop(H, W).
    CentralCrop,
  };
  Kind kind = Kind::Resize;
  int64_t height = 0;
  int64_t width = 0;
  /// The op as written, for messages.
  std::string text;
};

/// A parsed `preprocess` string.
struct PreprocessSpec {
  /// decode(precise=True): libjpeg's accurate integer IDCT (JDCT_ISLOW)
  /// instead of TensorFlow's default fast one (JDCT_IFAST).
  bool precise = false;
  /// decode(channels=C); 0 when not given.
  int64_t channels = 0;
  /// Resizes and crops, in order.
  llvm::SmallVector<GeometryOp, 3> geometry;
  /// value_range(low, high): pixels map to [low, high] instead of p / 255.
  std::optional<std::pair<double, double>> valueRange;
};

namespace preprocess_detail {

/// One argument value: a number, True/False, a quoted string, or a pair of
/// numbers written (a, b) or [a, b].
struct ArgValue {
  enum class Kind { Number, Bool, String, Pair } kind = Kind::Number;
  double number = 0;
  bool boolean = false;
  std::string string;
  double pair[2] = {0, 0};
  /// The text of the value, for messages.
  std::string text;
};

/// One argument: positional (`key` empty) or keyword.
struct Arg {
  std::string key;
  ArgValue value;
};

/// Reads the text of one op ("name", "name()" or "name(args)").
class OpParser {
public:
  explicit OpParser(llvm::StringRef text) : text(text) {}

  /// Parses the op into `name` and `args`; on failure returns the problem.
  std::optional<std::string> parse(std::string &name,
                                   llvm::SmallVectorImpl<Arg> &args) {
    skipSpaces();
    llvm::StringRef id = identifier();
    if (id.empty())
      return std::string("expected an op name");
    name = id.str();
    skipSpaces();
    if (atEnd())
      return std::nullopt;
    if (!consume('('))
      return "unexpected '" + rest().str() + "' after '" + name + "'";
    skipSpaces();
    if (consume(')'))
      return finish();
    while (true) {
      Arg arg;
      size_t start = position;
      llvm::StringRef key = identifier();
      skipSpaces();
      if (!key.empty() && consume('=')) {
        arg.key = key.str();
      } else {
        position = start;
      }
      if (std::optional<std::string> problem = value(arg.value))
        return problem;
      args.push_back(std::move(arg));
      skipSpaces();
      if (consume(')'))
        return finish();
      if (atEnd())
        return std::string("missing ')'");
      if (!consume(','))
        return "expected ',' or ')' at '" + rest().str() + "'";
      skipSpaces();
    }
  }

private:
  bool atEnd() const { return position >= text.size(); }
  llvm::StringRef rest() const { return text.substr(position); }
  void skipSpaces() {
    while (!atEnd() && llvm::isSpace(text[position]))
      ++position;
  }
  bool consume(char c) {
    if (atEnd() || text[position] != c)
      return false;
    ++position;
    return true;
  }
  llvm::StringRef identifier() {
    size_t start = position;
    if (atEnd() || !(llvm::isAlpha(text[position]) || text[position] == '_'))
      return {};
    while (!atEnd() && (llvm::isAlnum(text[position]) || text[position] == '_'))
      ++position;
    return text.slice(start, position);
  }
  std::optional<std::string> finish() {
    skipSpaces();
    if (!atEnd())
      return "unexpected '" + rest().str() + "' after ')'";
    return std::nullopt;
  }
  /// A number: [+-] digits [. digits] [e [+-] digits].
  std::optional<std::string> number(double &out) {
    size_t start = position;
    if (!atEnd() && (text[position] == '+' || text[position] == '-'))
      ++position;
    while (!atEnd() &&
           (llvm::isDigit(text[position]) || text[position] == '.' ||
            text[position] == 'e' || text[position] == 'E' ||
            ((text[position] == '+' || text[position] == '-') &&
             (text[position - 1] == 'e' || text[position - 1] == 'E'))))
      ++position;
    llvm::StringRef digits = text.slice(start, position);
    if (digits.getAsDouble(out) || !std::isfinite(out))
      return "expected a number at '" + text.substr(start).str() + "'";
    return std::nullopt;
  }
  std::optional<std::string> value(ArgValue &out) {
    size_t start = position;
    std::optional<std::string> problem;
    char c = atEnd() ? '\0' : text[position];
    if (c == '\'' || c == '"') {
      ++position;
      size_t end = text.find(c, position);
      if (end == llvm::StringRef::npos)
        return std::string("unterminated string");
      out.kind = ArgValue::Kind::String;
      out.string = text.slice(position, end).str();
      position = end + 1;
    } else if (c == '(' || c == '[') {
      char close = c == '(' ? ')' : ']';
      ++position;
      out.kind = ArgValue::Kind::Pair;
      for (int i = 0; i < 2 && !problem; ++i) {
        skipSpaces();
        problem = number(out.pair[i]);
        skipSpaces();
        if (!problem && !consume(i == 0 ? ',' : close))
          problem =
              "expected a pair (a, b) at '" + text.substr(start).str() + "'";
      }
    } else if (llvm::isAlpha(c)) {
      llvm::StringRef word = identifier();
      if (word != "True" && word != "False")
        return "expected a value, got '" + word.str() + "'";
      out.kind = ArgValue::Kind::Bool;
      out.boolean = word == "True";
    } else {
      out.kind = ArgValue::Kind::Number;
      problem = number(out.number);
    }
    out.text = text.slice(start, position).trim().str();
    return problem;
  }

  llvm::StringRef text;
  size_t position = 0;
};

/// Whether `x` is an integer in [1, kMaxImageSide].
inline bool isImageSide(double x) {
  return x >= 1 && x <= double(limits::kMaxImageSide) && x == std::floor(x);
}

/// The parameters of one op: names in positional order, and how many of
/// them are required.
struct Signature {
  llvm::SmallVector<llvm::StringRef, 5> names;
  size_t required = 0;
};

/// Binds `args` to `signature` (Python rules): the value of each parameter
/// or null, or the problem.
inline std::optional<std::string>
bindArgs(llvm::StringRef op, const Signature &signature,
         llvm::ArrayRef<Arg> args,
         llvm::SmallVectorImpl<const ArgValue *> &bound) {
  bound.assign(signature.names.size(), nullptr);
  size_t positional = 0;
  for (const Arg &arg : args) {
    size_t index;
    if (arg.key.empty()) {
      if (positional > 0 && !args[positional - 1].key.empty())
        return op.str() + ": positional argument after a keyword argument";
      index = positional++;
      if (index >= signature.names.size())
        return op.str() + ": takes at most " +
               std::to_string(signature.names.size()) + " argument(s)";
    } else {
      auto *it = llvm::find(signature.names, arg.key);
      if (it == signature.names.end())
        return op.str() + ": unknown argument '" + arg.key + "'";
      index = it - signature.names.begin();
    }
    if (bound[index])
      return op.str() + ": argument '" + signature.names[index].str() +
             "' given twice";
    bound[index] = &arg.value;
  }
  for (size_t i = 0; i < signature.required; ++i)
    if (!bound[i])
      return op.str() + ": missing argument '" + signature.names[i].str() + "'";
  return std::nullopt;
}

/// Checks that an optional argument, when given, has the only value vmoe
/// implements (`method='bilinear'`, `antialias=False`, ...).
inline std::optional<std::string> requireDefault(llvm::StringRef op,
                                                 llvm::StringRef name,
                                                 const ArgValue *value,
                                                 const ArgValue &expected) {
  if (!value)
    return std::nullopt;
  bool same =
      value->kind == expected.kind && value->number == expected.number &&
      value->boolean == expected.boolean && value->string == expected.string;
  if (same)
    return std::nullopt;
  return op.str() + ": " + name.str() + "=" + value->text +
         " is not supported (only " + expected.text + ")";
}

/// A size argument: S, (H, W) or [H, W], each in [1, kMaxImageSide].
inline std::optional<std::string> readSize(llvm::StringRef op,
                                           const ArgValue &value,
                                           bool pairAllowed, GeometryOp &out) {
  double h = value.number, w = value.number;
  if (value.kind == ArgValue::Kind::Pair && pairAllowed) {
    h = value.pair[0];
    w = value.pair[1];
  } else if (value.kind != ArgValue::Kind::Number) {
    return op.str() + ": the size must be " +
           (pairAllowed ? "an integer or a pair (H, W)" : "an integer") +
           ", got " + value.text;
  }
  if (!isImageSide(h) || !isImageSide(w))
    return op.str() + ": sizes must be integers in [1, " +
           std::to_string(limits::kMaxImageSide) + "], got " + value.text;
  out.height = static_cast<int64_t>(h);
  out.width = static_cast<int64_t>(w);
  return std::nullopt;
}

/// Fills `spec` from one op; returns the problem.
inline std::optional<std::string> readOp(llvm::StringRef name,
                                         llvm::StringRef opText,
                                         llvm::SmallVectorImpl<Arg> &args,
                                         PreprocessSpec &spec) {
  auto stringValue = [](llvm::StringRef s) {
    ArgValue v;
    v.kind = ArgValue::Kind::String;
    v.string = s.str();
    v.text = "'" + s.str() + "'";
    return v;
  };
  auto boolValue = [](bool b) {
    ArgValue v;
    v.kind = ArgValue::Kind::Bool;
    v.boolean = b;
    v.text = b ? "True" : "False";
    return v;
  };
  auto numberValue = [](double x, llvm::StringRef text) {
    ArgValue v;
    v.number = x;
    v.text = text.str();
    return v;
  };
  llvm::SmallVector<const ArgValue *, 5> bound;
  if (name == "decode") {
    if (auto problem =
            bindArgs(name, {{"channels", "precise"}, 0}, args, bound))
      return problem;
    if (const ArgValue *channels = bound[0]) {
      if (channels->kind != ArgValue::Kind::Number ||
          (channels->number != 1 && channels->number != 3))
        return "decode: channels must be 1 or 3, got " + channels->text;
      spec.channels = static_cast<int64_t>(channels->number);
    }
    if (const ArgValue *precise = bound[1]) {
      if (precise->kind != ArgValue::Kind::Bool)
        return "decode: precise must be True or False, got " + precise->text;
      spec.precise = precise->boolean;
    }
    return std::nullopt;
  }
  if (name == "value_range") {
    if (auto problem = bindArgs(
            name, {{"vmin", "vmax", "in_min", "in_max", "clip_values"}, 2},
            args, bound))
      return problem;
    for (int i = 0; i < 2; ++i)
      if (bound[i]->kind != ArgValue::Kind::Number)
        return "value_range: vmin and vmax must be numbers, got " +
               bound[i]->text;
    if (bound[0]->number == bound[1]->number)
      return std::string("value_range: vmin and vmax must differ");
    for (auto [index, expected] :
         {std::pair<int, ArgValue>{2, numberValue(0, "0")},
          {3, numberValue(255, "255")},
          {4, boolValue(false)}})
      if (auto problem = requireDefault(name,
                                        index == 2   ? "in_min"
                                        : index == 3 ? "in_max"
                                                     : "clip_values",
                                        bound[index], expected))
        return problem;
    spec.valueRange = {bound[0]->number, bound[1]->number};
    return std::nullopt;
  }
  GeometryOp op;
  op.text = opText.str();
  // resize(H, W) and central_crop(H, W): vmoe's spelling of big_vision's
  // resize((H, W)).
  bool twoSizes = (name == "resize" || name == "central_crop") &&
                  args.size() == 2 && args[0].key.empty() &&
                  args[1].key.empty() &&
                  args[0].value.kind == ArgValue::Kind::Number &&
                  args[1].value.kind == ArgValue::Kind::Number;
  if (twoSizes) {
    GeometryOp w;
    if (auto problem = readSize(name, args[0].value, false, op))
      return problem;
    if (auto problem = readSize(name, args[1].value, false, w))
      return problem;
    op.width = w.width;
  } else if (name == "resize" || name == "resize_small") {
    bool small = name == "resize_small";
    llvm::StringRef sizeName = small ? "smaller_size" : "size";
    if (auto problem =
            bindArgs(name, {{sizeName, "method", "antialias"}, 1}, args, bound))
      return problem;
    if (auto problem = readSize(name, *bound[0], !small, op))
      return problem;
    if (auto problem = requireDefault(name, "method", bound[1],
                                      stringValue(small ? "area" : "bilinear")))
      return problem;
    if (auto problem =
            requireDefault(name, "antialias", bound[2], boolValue(false)))
      return problem;
  } else if (name == "central_crop") {
    if (auto problem = bindArgs(name, {{"crop_size"}, 1}, args, bound))
      return problem;
    if (auto problem = readSize(name, *bound[0], true, op))
      return problem;
  } else {
    return "unknown op '" + name.str() +
           "' (known: decode, resize, resize_small, central_crop, "
           "value_range)";
  }
  op.kind = name == "resize"         ? GeometryOp::Kind::Resize
            : name == "resize_small" ? GeometryOp::Kind::ResizeSmall
                                     : GeometryOp::Kind::CentralCrop;
  if (op.kind == GeometryOp::Kind::ResizeSmall)
    op.width = op.height;
  else if (op.height * op.width > limits::kMaxImagePixels)
    return opText.str() + ": " + std::to_string(op.height * op.width) +
           " pixels, above the limit " +
           std::to_string(limits::kMaxImagePixels);
  spec.geometry.push_back(std::move(op));
  return std::nullopt;
}

} // namespace preprocess_detail

/// Parses a `preprocess` string: `decode` first, then any resizes and
/// crops, then optionally `value_range` (docs/ModelFormat.md §4). Errors
/// are one line without a field prefix.
inline llvm::Expected<PreprocessSpec> parsePreprocess(llvm::StringRef text) {
  using namespace preprocess_detail;
  PreprocessSpec spec;
  llvm::SmallVector<llvm::StringRef, 6> ops;
  text.split(ops, '|');
  for (auto [index, rawOp] : llvm::enumerate(ops)) {
    llvm::StringRef opText = rawOp.trim();
    std::string name;
    llvm::SmallVector<Arg, 5> args;
    OpParser parser(opText);
    std::optional<std::string> problem = parser.parse(name, args);
    if (!problem && name == "decode" && index != 0)
      problem = "decode must be the first op";
    if (!problem && index == 0 && name != "decode")
      problem = "the first op must be decode, got '" + name + "'";
    if (!problem && spec.valueRange)
      problem = "value_range must be the last op";
    if (!problem)
      problem = readOp(name, opText, args, spec);
    if (problem)
      return llvm::createStringError(*problem + " (op " +
                                     std::to_string(index + 1) + ": '" +
                                     opText.str() + "')");
  }
  return spec;
}

/// Checks `spec` against a model's image: decode's channels, and that the
/// pipeline makes images of exactly height x width (its last resize or
/// crop; a central crop must fit the image the resize before it makes,
/// and without any resize or crop the image file must have the model's
/// size, which the runtime checks).
inline llvm::Error checkPreprocess(const PreprocessSpec &spec, int64_t channels,
                                   int64_t height, int64_t width) {
  auto size = [](int64_t h, int64_t w) {
    return std::to_string(h) + "x" + std::to_string(w);
  };
  if (spec.channels && spec.channels != channels)
    return llvm::createStringError(
        "decode(channels=" + std::to_string(spec.channels) +
        "): the model takes " + std::to_string(channels) + "-channel images");
  if (spec.geometry.empty())
    return llvm::Error::success();
  // The size every image has after each op: unknown (0) before the first
  // resize; after resize_small only its shorter side is known.
  int64_t h = 0, w = 0, shorter = 0;
  for (const GeometryOp &op : spec.geometry) {
    if (op.kind == GeometryOp::Kind::CentralCrop &&
        ((h && (op.height > h || op.width > w)) ||
         (shorter && std::max(op.height, op.width) > shorter)))
      return llvm::createStringError(
          op.text + " does not fit the images the op before it makes (" +
          (h ? size(h, w) : "shorter side " + std::to_string(shorter)) + ")");
    bool small = op.kind == GeometryOp::Kind::ResizeSmall;
    h = small ? 0 : op.height;
    w = small ? 0 : op.width;
    shorter = small ? op.height : 0;
  }
  if (h != height || w != width)
    return llvm::createStringError(
        "the pipeline must end with a resize or central_crop to the model's " +
        size(height, width) + " (height x width), " +
        (h ? "got " + size(h, w)
           : "its last op is " + spec.geometry.back().text));
  return llvm::Error::success();
}

/// The pipeline of a model without `preprocess`: decode|resize(H, W).
inline PreprocessSpec defaultPreprocess(int64_t height, int64_t width) {
  PreprocessSpec spec;
  GeometryOp resize;
  resize.kind = GeometryOp::Kind::Resize;
  resize.height = height;
  resize.width = width;
  resize.text =
      "resize(" + std::to_string(height) + ", " + std::to_string(width) + ")";
  spec.geometry.push_back(std::move(resize));
  return spec;
}

} // namespace vmoe

#endif // VMOE_SUPPORT_PREPROCESSSPEC_H
