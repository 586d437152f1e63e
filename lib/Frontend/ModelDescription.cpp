//===- ModelDescription.cpp - V-MoE model descriptions ----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// JSON -> ModelDescription with llvm::json. Every field is read through a
// FieldReader that knows its dotted path, so each error names the field;
// unknown fields are errors too, to catch typos.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Frontend/ModelDescription.h"

#include "vmoe/Dialect/VMoE/IR/Capacity.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <cmath>

using namespace mlir::vmoe::frontend;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;

static Error fieldError(const llvm::Twine &field, const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 field + ": " + message);
}

namespace {

/// Reads the fields of one JSON object; remembers which were read so that
/// the rest can be reported as unknown.
class FieldReader {
public:
  FieldReader(const llvm::json::Object &object, std::string prefix)
      : object(object), prefix(std::move(prefix)) {}

  /// The dotted name of `key` in this object.
  std::string path(StringRef key) const { return prefix + key.str(); }

  const llvm::json::Value *get(StringRef key) {
    seen.insert(key);
    return object.get(key);
  }

  Error missing(StringRef key) const {
    return fieldError(path(key), "missing (required)");
  }

  /// An integer >= minimum; `required` false keeps `out` when absent.
  Error readInt(StringRef key, int64_t &out, int64_t minimum,
                bool required = true) {
    const llvm::json::Value *v = get(key);
    if (!v)
      return required ? missing(key) : Error::success();
    std::optional<int64_t> value = v->getAsInteger();
    if (!value)
      return fieldError(path(key), "must be an integer");
    if (*value < minimum)
      return fieldError(path(key), llvm::formatv("must be >= {0}, got {1}",
                                                 minimum, *value));
    out = *value;
    return Error::success();
  }

  /// A finite number > 0.
  Error readPositive(StringRef key, double &out, bool required = true) {
    const llvm::json::Value *v = get(key);
    if (!v)
      return required ? missing(key) : Error::success();
    std::optional<double> value = v->getAsNumber();
    if (!value)
      return fieldError(path(key), "must be a number");
    if (!std::isfinite(*value) || *value <= 0)
      return fieldError(path(key),
                        "must be a finite number > 0, got " +
                            ::vmoe::formatShortest(*value));
    out = *value;
    return Error::success();
  }

  Error readBool(StringRef key, bool &out) {
    const llvm::json::Value *v = get(key);
    if (!v)
      return Error::success();
    std::optional<bool> value = v->getAsBoolean();
    if (!value)
      return fieldError(path(key), "must be true or false");
    out = *value;
    return Error::success();
  }

  /// A string; with `choices`, one of them.
  Error readString(StringRef key, std::string &out, bool required,
                   llvm::ArrayRef<StringRef> choices = {}) {
    const llvm::json::Value *v = get(key);
    if (!v)
      return required ? missing(key) : Error::success();
    std::optional<StringRef> value = v->getAsString();
    if (!value)
      return fieldError(path(key), "must be a string");
    if (!choices.empty() && !llvm::is_contained(choices, *value)) {
      std::string list;
      for (StringRef choice : choices)
        list += (list.empty() ? "" : ", ") + ("\"" + choice + "\"").str();
      return fieldError(path(key), "must be one of " + list + ", got \"" +
                                       *value + "\"");
    }
    out = value->str();
    return Error::success();
  }

  /// A nested object; `out` is null when absent and not required.
  Error readObject(StringRef key, const llvm::json::Object *&out,
                   bool required) {
    const llvm::json::Value *v = get(key);
    out = nullptr;
    if (!v)
      return required ? missing(key) : Error::success();
    out = v->getAsObject();
    if (!out)
      return fieldError(path(key), "must be an object");
    return Error::success();
  }

  /// A list of `count` numbers.
  Error readNumbers(StringRef key, std::vector<double> &out, size_t count) {
    const llvm::json::Value *v = get(key);
    if (!v)
      return Error::success();
    const llvm::json::Array *array = v->getAsArray();
    if (!array)
      return fieldError(path(key), "must be a list of numbers");
    if (array->size() != count)
      return fieldError(path(key),
                        llvm::formatv("must have {0} entries (one per "
                                      "channel), got {1}",
                                      count, array->size()));
    out.clear();
    for (const llvm::json::Value &entry : *array) {
      std::optional<double> number = entry.getAsNumber();
      if (!number || !std::isfinite(*number))
        return fieldError(path(key), "must be a list of finite numbers");
      out.push_back(*number);
    }
    return Error::success();
  }

  /// Reports the first field that was not read.
  Error rejectUnknown() const {
    for (const auto &entry : object)
      if (!seen.contains(entry.first.str()))
        return fieldError(path(entry.first), "unknown field");
    return Error::success();
  }

private:
  const llvm::json::Object &object;
  std::string prefix;
  llvm::StringSet<> seen;
};

} // namespace

static const StringRef kActivations[] = {"gelu_tanh", "gelu_erf", "relu",
                                         "silu"};

static Error parseMoE(const llvm::json::Object &object, MoESettings &moe) {
  FieldReader r(object, "moe.");
  if (Error e = r.readString("placement", moe.placement, /*required=*/true,
                             {"every-2", "last-n"}))
    return e;
  if (moe.placement == "last-n") {
    if (Error e = r.readInt("last_n", moe.lastN, 1))
      return e;
  } else if (r.get("last_n")) {
    return fieldError("moe.last_n", "only used with placement \"last-n\"");
  }
  if (Error e = r.readInt("num_experts", moe.numExperts, 1))
    return e;
  if (Error e = r.readInt("k", moe.k, 1))
    return e;
  if (Error e = r.readPositive("capacity_ratio", moe.capacityRatio, false))
    return e;
  if (Error e = r.readString("capacity_rule", moe.capacityRule, false,
                             {"round", "ceil"}))
    return e;
  if (Error e = r.readInt("multiple_of", moe.multipleOf, 1, false))
    return e;
  if (Error e = r.readString("routing", moe.routing, false, {"vanilla", "bpr"}))
    return e;
  if (Error e = r.readString("score", moe.score, false, {"max", "sum_topk"}))
    return e;
  if (Error e = r.readString("order", moe.order, false,
                             {"softmax_topk", "topk_softmax"}))
    return e;
  if (Error e = r.readBool("normalize", moe.normalize))
    return e;
  if (Error e = r.readString("activation", moe.activation, false,
                             kActivations))
    return e;
  if (Error e = r.readInt("group_size", moe.groupSize, 1))
    return e;
  return r.rejectUnknown();
}

Expected<ModelDescription>
mlir::vmoe::frontend::parseModelDescription(StringRef json) {
  Expected<llvm::json::Value> parsed = llvm::json::parse(json);
  if (!parsed)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "malformed JSON: " +
                                       llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the description must be a JSON object");
  ModelDescription model;
  FieldReader r(*root, "");
  std::string format;
  if (Error e = r.readString("format", format, true, {"vmoe-model"}))
    return std::move(e);
  int64_t version = 0;
  if (Error e = r.readInt("version", version, 1))
    return std::move(e);
  if (version != 1)
    return fieldError("version", llvm::formatv("must be 1, got {0}", version));
  if (Error e = r.readString("name", model.name, true))
    return std::move(e);

  const llvm::json::Object *image = nullptr;
  if (Error e = r.readObject("image", image, true))
    return std::move(e);
  FieldReader ir(*image, "image.");
  if (Error e = ir.readInt("height", model.height, 1))
    return std::move(e);
  if (Error e = ir.readInt("width", model.width, 1))
    return std::move(e);
  if (Error e = ir.readInt("channels", model.channels, 1))
    return std::move(e);
  if (Error e = ir.rejectUnknown())
    return std::move(e);

  model.mean.assign(model.channels, 0.0);
  model.std.assign(model.channels, 1.0);
  const llvm::json::Object *input = nullptr;
  if (Error e = r.readObject("input", input, false))
    return std::move(e);
  if (input) {
    FieldReader inr(*input, "input.");
    if (Error e = inr.readNumbers("mean", model.mean, model.channels))
      return std::move(e);
    if (Error e = inr.readNumbers("std", model.std, model.channels))
      return std::move(e);
    for (double s : model.std)
      if (s == 0)
        return fieldError("input.std", "must not contain 0");
    if (Error e = inr.rejectUnknown())
      return std::move(e);
  }

  if (Error e = r.readInt("patch_size", model.patchSize, 1))
    return std::move(e);
  if (Error e = r.readInt("width", model.modelWidth, 1))
    return std::move(e);
  if (Error e = r.readInt("depth", model.depth, 1))
    return std::move(e);
  if (Error e = r.readInt("heads", model.heads, 1))
    return std::move(e);
  if (Error e = r.readInt("mlp_dim", model.mlpDim, 1))
    return std::move(e);
  if (Error e = r.readInt("classes", model.classes, 1))
    return std::move(e);
  if (const llvm::json::Value *names = r.get("class_names")) {
    const llvm::json::Array *array = names->getAsArray();
    if (!array)
      return fieldError("class_names", "must be a list of strings");
    for (const llvm::json::Value &entry : *array) {
      std::optional<StringRef> name = entry.getAsString();
      if (!name)
        return fieldError("class_names", "must be a list of strings");
      model.classNames.push_back(name->str());
    }
  }
  if (Error e = r.readString("head", model.head, true, {"token", "gap"}))
    return std::move(e);
  if (Error e = r.readPositive("layer_norm_epsilon", model.layerNormEpsilon,
                               false))
    return std::move(e);
  if (Error e = r.readString("mlp_activation", model.mlpActivation, false,
                             kActivations))
    return std::move(e);
  std::string dtype = "f32";
  if (Error e = r.readString("dtype", dtype, false, {"f32"}))
    return std::move(e);

  const llvm::json::Object *moe = nullptr;
  if (Error e = r.readObject("moe", moe, true))
    return std::move(e);
  if (Error e = parseMoE(*moe, model.moe))
    return std::move(e);
  if (Error e = r.rejectUnknown())
    return std::move(e);
  if (Error e = validateModelDescription(model))
    return std::move(e);
  return model;
}

Error mlir::vmoe::frontend::validateModelDescription(
    const ModelDescription &model) {
  if (model.height % model.patchSize != 0 ||
      model.width % model.patchSize != 0)
    return fieldError("patch_size",
                      llvm::formatv("image {0}x{1} is not divisible into "
                                    "{2}x{2} patches",
                                    model.height, model.width,
                                    model.patchSize));
  if (model.modelWidth % model.heads != 0)
    return fieldError("heads",
                      llvm::formatv("width {0} is not divisible by {1} heads",
                                    model.modelWidth, model.heads));
  if (!model.classNames.empty() &&
      static_cast<int64_t>(model.classNames.size()) != model.classes)
    return fieldError("class_names",
                      llvm::formatv("must have {0} entries (classes), got {1}",
                                    model.classes, model.classNames.size()));
  const MoESettings &moe = model.moe;
  if (moe.k > moe.numExperts)
    return fieldError("moe.k", llvm::formatv("must be <= moe.num_experts ({0}), "
                                             "got {1}",
                                             moe.numExperts, moe.k));
  if (moe.placement == "last-n") {
    int64_t oddBlocks = model.depth / 2;
    if (moe.lastN > oddBlocks)
      return fieldError("moe.last_n",
                        llvm::formatv("depth {0} has only {1} odd-indexed "
                                      "blocks, got {2}",
                                      model.depth, oddBlocks, moe.lastN));
  }
  return Error::success();
}

llvm::SmallVector<int64_t> ModelDescription::moeBlocks() const {
  llvm::SmallVector<int64_t> blocks;
  for (int64_t i = 1; i < depth; i += 2)
    blocks.push_back(i);
  if (moe.placement == "last-n" &&
      static_cast<int64_t>(blocks.size()) > moe.lastN)
    blocks.erase(blocks.begin(), blocks.end() - moe.lastN);
  return blocks;
}

bool ModelDescription::isMoEBlock(int64_t i) const {
  return llvm::is_contained(moeBlocks(), i);
}

int64_t WeightTensor::numElements() const {
  int64_t n = 1;
  for (int64_t dim : shape)
    n *= dim;
  return n;
}

std::vector<WeightTensor>
mlir::vmoe::frontend::weightLayout(const ModelDescription &model) {
  std::vector<WeightTensor> layout;
  int64_t d = model.modelWidth, h = model.mlpDim, e = model.moe.numExperts;
  int64_t offset = 0;
  auto add = [&](std::string name, llvm::SmallVector<int64_t> shape) {
    WeightTensor tensor{std::move(name), std::move(shape), offset};
    // Keep every tensor 64-byte aligned for vector loads.
    offset += (tensor.numElements() + 15) / 16 * 16;
    layout.push_back(std::move(tensor));
  };
  int64_t patchValues = model.channels * model.patchSize * model.patchSize;
  add("embedding.kernel", {patchValues, d});
  add("embedding.bias", {d});
  if (model.head == "token")
    add("cls_token", {1, d});
  add("pos_embedding", {model.tokensPerImage(), d});
  for (int64_t i = 0; i < model.depth; ++i) {
    std::string block = "blocks." + std::to_string(i) + ".";
    add(block + "ln1.scale", {d});
    add(block + "ln1.bias", {d});
    add(block + "attn.qkv.kernel", {d, 3 * d});
    add(block + "attn.qkv.bias", {3 * d});
    add(block + "attn.out.kernel", {d, d});
    add(block + "attn.out.bias", {d});
    add(block + "ln2.scale", {d});
    add(block + "ln2.bias", {d});
    if (model.isMoEBlock(i)) {
      add(block + "moe.router.kernel", {d, e});
      add(block + "moe.w1", {e, d, h});
      add(block + "moe.b1", {e, h});
      add(block + "moe.w2", {e, h, d});
      add(block + "moe.b2", {e, d});
    } else {
      add(block + "mlp.fc1.kernel", {d, h});
      add(block + "mlp.fc1.bias", {h});
      add(block + "mlp.fc2.kernel", {h, d});
      add(block + "mlp.fc2.bias", {d});
    }
  }
  add("final_ln.scale", {d});
  add("final_ln.bias", {d});
  add("head.kernel", {d, model.classes});
  add("head.bias", {model.classes});
  return layout;
}

int64_t
mlir::vmoe::frontend::weightsSize(const std::vector<WeightTensor> &layout) {
  if (layout.empty())
    return 0;
  const WeightTensor &last = layout.back();
  return last.offset + (last.numElements() + 15) / 16 * 16;
}
