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
#include "vmoe/Frontend/SizeLimits.h"

#include "vmoe/Dialect/VMoE/IR/Capacity.h"
#include "vmoe/Support/BoundedJson.h"
#include "vmoe/Support/Limits.h"
#include "vmoe/Support/PreprocessSpec.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <cmath>
#include <numeric>

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

  /// An integer in [minimum, maximum]; `required` false keeps `out` when
  /// absent. Every count and dimension is bounded (docs/Limits.md).
  Error readInt(StringRef key, int64_t &out, int64_t minimum,
                bool required = true,
                int64_t maximum = ::vmoe::limits::kMaxDimension) {
    const llvm::json::Value *v = get(key);
    if (!v)
      return required ? missing(key) : Error::success();
    std::optional<int64_t> value = v->getAsInteger();
    if (!value)
      return fieldError(path(key), "must be an integer");
    if (*value < minimum)
      return fieldError(path(key), llvm::formatv("must be >= {0}, got {1}",
                                                 minimum, *value));
    if (*value > maximum)
      return fieldError(path(key), llvm::formatv("must be <= {0} (the limit), "
                                                 "got {1}",
                                                 maximum, *value));
    out = *value;
    return Error::success();
  }

  /// A finite number in (0, maximum].
  Error readPositive(StringRef key, double &out, bool required = true,
                     double maximum = HUGE_VAL) {
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
    if (*value > maximum)
      return fieldError(path(key), "must be <= " +
                                       ::vmoe::formatShortest(maximum) +
                                       " (the limit), got " +
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

  /// Reads `key` with `read` into `out` when present (an absent key leaves
  /// `out` empty).
  template <typename T, typename ReadFn>
  Error readOptional(StringRef key, std::optional<T> &out, ReadFn read) {
    if (!object.get(key)) {
      seen.insert(key);
      return Error::success();
    }
    T value{};
    if (Error e = read(value))
      return e;
    out = std::move(value);
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

static const StringRef kRoutings[] = {"vanilla", "bpr", "expert_choice",
                                      "soft"};

/// Rejects `key` of `r` unless `used` (the routing of the object it is in
/// does not use it).
static Error onlyUsedBy(FieldReader &r, StringRef key, bool used,
                        StringRef users, StringRef routing) {
  if (used || !r.get(key))
    return Error::success();
  return fieldError(r.path(key), "only used by routing " + users +
                                     ", got routing \"" + routing + "\"");
}

/// SwiGLU experts use silu: rejects any other `activation` in an object of
/// a model with `expert` "swiglu".
static Error checkSwiGLUActivation(FieldReader &r, StringRef expert) {
  const llvm::json::Value *v = r.get("activation");
  if (expert != "swiglu" || !v || v->getAsString() == StringRef("silu"))
    return Error::success();
  std::string got = v->getAsString() ? "\"" + v->getAsString()->str() + "\""
                                     : std::string("a non-string");
  return fieldError(r.path("activation"),
                    "SwiGLU experts (moe.expert \"swiglu\") use silu, got " +
                        got);
}

/// Rejects block indices at or above the depth limit, which also bounds the
/// length of lists of distinct indices (their checks are quadratic).
static Error checkBlockIndex(const llvm::Twine &field, int64_t index) {
  if (index < ::vmoe::limits::kMaxDepth)
    return Error::success();
  return fieldError(field, llvm::formatv("block {0} is not below the depth "
                                         "limit {1}",
                                         index, ::vmoe::limits::kMaxDepth));
}

/// The fields of one `moe.overrides` entry; `base` is the `moe` object.
static Error parseOverride(const llvm::json::Value &value, size_t index,
                           const MoESettings &base, MoEOverride &entry) {
  std::string prefix = "moe.overrides[" + std::to_string(index) + "]";
  const llvm::json::Object *object = value.getAsObject();
  if (!object)
    return fieldError(prefix, "must be an object");
  FieldReader r(*object, prefix + ".");
  const llvm::json::Value *blocks = r.get("blocks");
  if (!blocks)
    return r.missing("blocks");
  const llvm::json::Array *list = blocks->getAsArray();
  if (!list || list->empty())
    return fieldError(r.path("blocks"),
                      "must be a non-empty list of block indices");
  for (const llvm::json::Value &block : *list) {
    std::optional<int64_t> number = block.getAsInteger();
    if (!number || *number < 0)
      return fieldError(r.path("blocks"),
                        "must be a list of integers >= 0");
    if (Error e = checkBlockIndex(r.path("blocks"), *number))
      return e;
    if (llvm::is_contained(entry.blocks, *number))
      return fieldError(r.path("blocks"),
                        llvm::formatv("block {0} is listed twice", *number));
    entry.blocks.push_back(*number);
  }
  auto string = [&](StringRef key, std::optional<std::string> &out,
                    llvm::ArrayRef<StringRef> choices) {
    return r.readOptional(key, out, [&](std::string &v) {
      return r.readString(key, v, true, choices);
    });
  };
  auto integer = [&](StringRef key, std::optional<int64_t> &out) {
    return r.readOptional(
        key, out, [&](int64_t &v) { return r.readInt(key, v, 1); });
  };
  if (Error e = string("routing", entry.routing, kRoutings))
    return e;
  std::string routing = entry.routing.value_or(base.routing);
  bool tokenChoice = routing == "vanilla" || routing == "bpr";
  bool soft = routing == "soft";
  if (Error e = onlyUsedBy(r, "k", tokenChoice, "vanilla or bpr", routing))
    return e;
  if (Error e = integer("k", entry.k))
    return e;
  if (Error e = string("score", entry.score, {"max", "sum_topk"}))
    return e;
  if (Error e = string("order", entry.order, {"softmax_topk", "topk_softmax"}))
    return e;
  if (Error e = r.readOptional("normalize", entry.normalize, [&](bool &v) {
        return r.readBool("normalize", v);
      }))
    return e;
  if (Error e = string("capacity_rule", entry.capacityRule, {"round", "ceil"}))
    return e;
  if (Error e = integer("multiple_of", entry.multipleOf))
    return e;
  if (Error e = checkSwiGLUActivation(r, base.expert))
    return e;
  if (Error e = string("activation", entry.activation, kActivations))
    return e;
  for (StringRef key : {"slots_per_expert", "soft_group_size"})
    if (Error e = onlyUsedBy(r, key, soft, "\"soft\"", routing))
      return e;
  if (Error e = integer("slots_per_expert", entry.slotsPerExpert))
    return e;
  if (Error e = integer("soft_group_size", entry.softGroupSize))
    return e;
  return r.rejectUnknown();
}

/// Reads `moe.layers`: block indices, sorted and distinct on return.
static Error readLayerList(FieldReader &r, std::vector<int64_t> &layers) {
  const llvm::json::Value *v = r.get("layers");
  if (!v)
    return r.missing("layers");
  const llvm::json::Array *array = v->getAsArray();
  if (!array)
    return fieldError("moe.layers", "must be a list of block indices");
  for (const llvm::json::Value &entry : *array) {
    std::optional<int64_t> index = entry.getAsInteger();
    if (!index || *index < 0)
      return fieldError("moe.layers",
                        "must be a list of block indices (integers >= 0)");
    if (Error e = checkBlockIndex("moe.layers", *index))
      return e;
    if (llvm::is_contained(layers, *index))
      return fieldError("moe.layers",
                        llvm::formatv("block {0} is listed twice", *index));
    layers.push_back(*index);
  }
  llvm::sort(layers);
  return Error::success();
}

/// The MoE placement (`moe.placement` and its parameter).
static Error parsePlacement(FieldReader &r, MoESettings &moe) {
  if (Error e = r.readString("placement", moe.placement, /*required=*/true,
                             {"every-2", "every-n", "last-n", "layers"}))
    return e;
  struct Parameter {
    StringRef key, placement;
  };
  for (Parameter p :
       {Parameter{"last_n", "last-n"}, Parameter{"every", "every-n"},
        Parameter{"layers", "layers"}}) {
    if (moe.placement == p.placement)
      continue;
    if (r.get(p.key))
      return fieldError("moe." + p.key,
                        "only used with placement \"" + p.placement + "\"");
  }
  if (moe.placement == "last-n")
    return r.readInt("last_n", moe.lastN, 1);
  if (moe.placement == "every-n")
    return r.readInt("every", moe.every, 1);
  if (moe.placement == "layers")
    return readLayerList(r, moe.layers);
  return Error::success();
}

/// The capacity: a ratio (default), or a fixed `capacity`.
static Error parseCapacity(FieldReader &r, MoESettings &moe) {
  if (r.get("capacity")) {
    for (StringRef key : {"capacity_ratio", "capacity_rule", "multiple_of"})
      if (r.get(key))
        return fieldError("moe." + key, "not used with a fixed moe.capacity");
    return r.readInt("capacity", moe.capacity, 1);
  }
  // "none": dropless (B = S), without capacity rule or multiple.
  const llvm::json::Value *ratio = r.get("capacity_ratio");
  if (ratio && ratio->getAsString()) {
    if (*ratio->getAsString() != "none")
      return fieldError("moe.capacity_ratio",
                        "must be a number > 0 or \"none\" (dropless), got "
                        "\"" +
                            *ratio->getAsString() + "\"");
    for (StringRef key : {"capacity_rule", "multiple_of"})
      if (r.get(key))
        return fieldError("moe." + key, "not used with moe.capacity_ratio "
                                        "\"none\" (dropless)");
    moe.dropless = true;
    return Error::success();
  }
  if (Error e = r.readPositive("capacity_ratio", moe.capacityRatio, false,
                               ::vmoe::limits::kMaxCapacityRatio))
    return e;
  if (Error e = r.readString("capacity_rule", moe.capacityRule, false,
                             {"round", "ceil"}))
    return e;
  return r.readInt("multiple_of", moe.multipleOf, 1, false);
}

/// The routing group: `group_size` images or `group_tokens` tokens.
static Error parseGroup(FieldReader &r, MoESettings &moe) {
  if (r.get("group_tokens")) {
    if (r.get("group_size"))
      return fieldError("moe.group_tokens",
                        "give moe.group_size or moe.group_tokens, not both");
    return r.readInt("group_tokens", moe.groupTokens, 1);
  }
  return r.readInt("group_size", moe.groupSize, 1);
}

static Error parseMoE(const llvm::json::Object &object, MoESettings &moe) {
  FieldReader r(object, "moe.");
  if (Error e = parsePlacement(r, moe))
    return e;
  if (Error e = r.readInt("num_experts", moe.numExperts, 1))
    return e;
  if (Error e = r.readString("routing", moe.routing, false, kRoutings))
    return e;
  if (Error e = onlyUsedBy(r, "k", moe.isTokenChoice(), "vanilla or bpr",
                           moe.routing))
    return e;
  if (moe.isTokenChoice())
    if (Error e = r.readInt("k", moe.k, 1))
      return e;
  if (Error e = r.readInt("mlp_dim", moe.mlpDim, 1, false))
    return e;
  if (Error e = r.readString("expert", moe.expert, false, {"mlp", "swiglu"}))
    return e;
  if (Error e = r.readInt("shared_experts", moe.sharedExperts, 0, false))
    return e;
  if (Error e = parseCapacity(r, moe))
    return e;
  if (Error e = r.readString("score", moe.score, false, {"max", "sum_topk"}))
    return e;
  if (Error e = r.readString("order", moe.order, false,
                             {"softmax_topk", "topk_softmax"}))
    return e;
  if (Error e = r.readBool("normalize", moe.normalize))
    return e;
  if (Error e = checkSwiGLUActivation(r, moe.expert))
    return e;
  if (moe.expert == "swiglu")
    moe.activation = "silu";
  if (Error e = r.readString("activation", moe.activation, false,
                             kActivations))
    return e;
  if (Error e = parseGroup(r, moe))
    return e;
  for (StringRef key : {"slots_per_expert", "soft_group_size"})
    if (Error e = onlyUsedBy(r, key, moe.routing == "soft", "\"soft\"",
                             moe.routing))
      return e;
  if (Error e = r.readInt("slots_per_expert", moe.slotsPerExpert, 1, false))
    return e;
  if (Error e = r.readInt("soft_group_size", moe.softGroupSize, 1, false))
    return e;
  if (const llvm::json::Value *overrides = r.get("overrides")) {
    const llvm::json::Array *list = overrides->getAsArray();
    if (!list)
      return fieldError("moe.overrides", "must be a list of objects");
    if (list->size() > static_cast<size_t>(::vmoe::limits::kMaxDepth))
      return fieldError("moe.overrides",
                        llvm::formatv("has {0} entries, above the depth "
                                      "limit {1}",
                                      list->size(),
                                      ::vmoe::limits::kMaxDepth));
    for (const auto &[index, value] : llvm::enumerate(*list)) {
      MoEOverride entry;
      if (Error e = parseOverride(value, index, moe, entry))
        return e;
      moe.overrides.push_back(std::move(entry));
    }
  }
  return r.rejectUnknown();
}

/// `patch_size`: one integer (square patches) or [height, width].
static Error parsePatchSize(FieldReader &r, ModelDescription &model) {
  const llvm::json::Value *v = r.get("patch_size");
  if (!v)
    return r.missing("patch_size");
  if (const llvm::json::Array *array = v->getAsArray()) {
    std::optional<int64_t> h, w;
    if (array->size() == 2) {
      h = (*array)[0].getAsInteger();
      w = (*array)[1].getAsInteger();
    }
    if (!h || !w || *h < 1 || *w < 1)
      return fieldError("patch_size", "must be an integer >= 1 or a list "
                                      "[height, width] of two");
    model.patchHeight = *h;
    model.patchWidth = *w;
    return Error::success();
  }
  if (Error e = r.readInt("patch_size", model.patchHeight, 1))
    return e;
  model.patchWidth = model.patchHeight;
  return Error::success();
}

/// `preprocess`: the image pipeline, checked against the image size; its
/// value_range and `input` are two ways to normalize, so not both.
static Error parsePreprocessField(FieldReader &r, ModelDescription &model,
                                  bool hasInput) {
  if (!r.get("preprocess"))
    return Error::success();
  if (Error e = r.readString("preprocess", model.preprocess, true))
    return e;
  Expected<::vmoe::PreprocessSpec> spec =
      ::vmoe::parsePreprocess(model.preprocess);
  if (!spec)
    return fieldError("preprocess", llvm::toString(spec.takeError()));
  if (Error e = ::vmoe::checkPreprocess(*spec, model.channels, model.height,
                                        model.width))
    return fieldError("preprocess", llvm::toString(std::move(e)));
  if (spec->valueRange && hasInput)
    return fieldError("input", "not used with value_range in preprocess "
                               "(both normalize the pixels: give one)");
  return Error::success();
}

Expected<ModelDescription>
mlir::vmoe::frontend::parseModelDescription(StringRef json) {
  Expected<llvm::json::Value> parsed = ::vmoe::parseBoundedJson(json);
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
  if (Error e = parsePreprocessField(r, model, input != nullptr))
    return std::move(e);

  if (Error e = parsePatchSize(r, model))
    return std::move(e);
  if (Error e = r.readInt("width", model.modelWidth, 1))
    return std::move(e);
  if (Error e = r.readInt("depth", model.depth, 1, true,
                          ::vmoe::limits::kMaxDepth))
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
  if (Error e = r.readString("head", model.head, true, {"token", "gap", "map"}))
    return std::move(e);
  if (Error e = r.readString("final_norm", model.finalNorm, false,
                             {"tokens", "pooled"}))
    return std::move(e);
  if (Error e =
          r.readInt("representation_size", model.representationSize, 1, false))
    return std::move(e);
  if (Error e = r.readPositive("layer_norm_epsilon", model.layerNormEpsilon,
                               false))
    return std::move(e);
  if (Error e =
          r.readString("norm", model.norm, false, {"layernorm", "rmsnorm"}))
    return std::move(e);
  if (Error e = r.readString("mlp_activation", model.mlpActivation, false,
                             kActivations))
    return std::move(e);
  std::string dtype = "f32";
  if (Error e = r.readString("dtype", dtype, false, {"f32"}))
    return std::move(e);

  // Without a `moe` object the model is a dense ViT.
  const llvm::json::Object *moe = nullptr;
  if (Error e = r.readObject("moe", moe, false))
    return std::move(e);
  model.hasMoE = moe != nullptr;
  if (moe)
    if (Error e = parseMoE(*moe, model.moe))
      return std::move(e);
  if (Error e = r.rejectUnknown())
    return std::move(e);
  if (Error e = validateModelDescription(model))
    return std::move(e);
  return model;
}

/// `moe.overrides[i].key` when entry i sets `key`, else `moe.key`.
static std::string layerField(const ModelDescription &model, int64_t block,
                              StringRef key, bool setByOverride) {
  for (const auto &[index, entry] : llvm::enumerate(model.moe.overrides))
    if (setByOverride && llvm::is_contained(entry.blocks, block))
      return ("moe.overrides[" + llvm::Twine(index) + "]." + key).str();
  return ("moe." + key).str();
}

/// SwiGLU experts and the dropless mode need token choice routing: errors
/// name the field that set the layer's routing.
static Error checkDecoderFields(const ModelDescription &model, int64_t block,
                                const MoESettings &layer,
                                const MoEOverride *entry) {
  if (layer.isTokenChoice())
    return Error::success();
  std::string routing =
      layerField(model, block, "routing", entry && entry->routing.has_value());
  if (layer.expert == "swiglu")
    return fieldError(routing, llvm::formatv("\"{0}\" (block {1}) does not "
                                             "take moe.expert \"swiglu\" "
                                             "(token choice only: vanilla or "
                                             "bpr)",
                                             layer.routing, block));
  if (layer.dropless)
    return fieldError(routing, llvm::formatv("\"{0}\" (block {1}) does not "
                                             "take moe.capacity_ratio "
                                             "\"none\" (dropless is token "
                                             "choice only: vanilla or bpr)",
                                             layer.routing, block));
  return Error::success();
}

/// The rules of every MoE layer (its own settings) and of moe.overrides.
static Error validateMoELayers(const ModelDescription &model) {
  llvm::SmallVector<int64_t> blocks = model.moeBlocks();
  for (const auto &[index, entry] : llvm::enumerate(model.moe.overrides)) {
    std::string path = "moe.overrides[" + std::to_string(index) + "].blocks";
    for (int64_t block : entry.blocks) {
      if (!llvm::is_contained(blocks, block)) {
        std::string list;
        for (int64_t b : blocks)
          list += (list.empty() ? "" : ", ") + std::to_string(b);
        return fieldError(path, llvm::formatv("block {0} is not a MoE block "
                                              "(MoE blocks: {1})",
                                              block, list.empty() ? "none"
                                                                  : list));
      }
      for (size_t other = 0; other < index; ++other)
        if (llvm::is_contained(model.moe.overrides[other].blocks, block))
          return fieldError(path, llvm::formatv("block {0} is already in "
                                                "moe.overrides[{1}]",
                                                block, other));
    }
  }
  const MoESettings &moe = model.moe;
  for (int64_t block : blocks) {
    MoESettings layer = model.layerSettings(block);
    const MoEOverride *entry = nullptr;
    for (const MoEOverride &candidate : moe.overrides)
      if (llvm::is_contained(candidate.blocks, block))
        entry = &candidate;
    if (Error e = checkDecoderFields(model, block, layer, entry))
      return e;
    if (layer.isTokenChoice()) {
      std::string field = layerField(
          model, block, "k",
          entry && (entry->k.has_value() || entry->routing.has_value()));
      if (layer.k < 1)
        return fieldError(field, llvm::formatv("missing (required by routing "
                                               "\"{0}\" in block {1})",
                                               layer.routing, block));
      if (layer.k > moe.numExperts)
        return fieldError(field,
                          llvm::formatv("must be <= moe.num_experts ({0}), "
                                        "got {1}",
                                        moe.numExperts, layer.k));
    }
    if (layer.routing != "soft")
      continue;
    if (moe.groupSize % layer.softGroupSize != 0)
      return fieldError(
          layerField(model, block, "soft_group_size",
                     entry && entry->softGroupSize.has_value()),
          llvm::formatv("must divide moe.group_size ({0}), got {1}",
                        moe.groupSize, layer.softGroupSize));
    if (model.layerSlotsPerExpert(layer) < 1)
      return fieldError(
          layerField(model, block, "slots_per_expert",
                     entry && entry->slotsPerExpert.has_value()),
          llvm::formatv("missing, and round(S/E) = round({0}/{1}) is 0 in "
                        "block {2}",
                        model.layerTokensPerGroup(layer), moe.numExperts,
                        block));
  }
  return Error::success();
}

/// Checks the MoE settings against the rest of the model.
static Error validateMoE(const ModelDescription &model) {
  const MoESettings &moe = model.moe;
  if (moe.groupTokens)
    for (int64_t block : model.moeBlocks())
      if (model.layerSettings(block).routing == "soft")
        return fieldError("moe.group_tokens",
                          llvm::formatv("not used by routing \"soft\" "
                                        "(block {0}): a Soft MoE group is "
                                        "whole images",
                                        block));
  if (moe.placement == "last-n") {
    int64_t oddBlocks = model.depth / 2;
    if (moe.lastN > oddBlocks)
      return fieldError("moe.last_n",
                        llvm::formatv("depth {0} has only {1} odd-indexed "
                                      "blocks, got {2}",
                                      model.depth, oddBlocks, moe.lastN));
  }
  if (moe.placement == "every-n" && moe.every > model.depth)
    return fieldError("moe.every",
                      llvm::formatv("must be <= depth ({0}), got {1}",
                                    model.depth, moe.every));
  if (moe.placement == "layers" && !moe.layers.empty() &&
      moe.layers.back() >= model.depth)
    return fieldError("moe.layers",
                      llvm::formatv("block {0} does not exist (depth {1})",
                                    moe.layers.back(), model.depth));
  return validateMoELayers(model);
}

Error mlir::vmoe::frontend::validateModelDescription(
    const ModelDescription &model) {
  if (model.height % model.patchHeight != 0 ||
      model.width % model.patchWidth != 0)
    return fieldError("patch_size",
                      llvm::formatv("image {0}x{1} is not divisible into "
                                    "{2}x{3} patches",
                                    model.height, model.width,
                                    model.patchHeight, model.patchWidth));
  if (model.modelWidth % model.heads != 0)
    return fieldError("heads",
                      llvm::formatv("width {0} is not divisible by {1} heads",
                                    model.modelWidth, model.heads));
  if (!model.classNames.empty() &&
      static_cast<int64_t>(model.classNames.size()) != model.classes)
    return fieldError("class_names",
                      llvm::formatv("must have {0} entries (classes), got {1}",
                                    model.classes, model.classNames.size()));
  if (Error e = checkTokenCounts(model))
    return e;
  if (model.hasMoE)
    if (Error e = validateMoE(model))
      return e;
  return checkWeightSizes(model);
}

int64_t ModelDescription::imagesPerGroupUnit() const {
  if (!moe.groupTokens)
    return moe.groupSize;
  int64_t t = tokensPerImage();
  return std::lcm(moe.groupTokens, t) / t;
}

llvm::SmallVector<int64_t> ModelDescription::moeBlocks() const {
  llvm::SmallVector<int64_t> blocks;
  if (!hasMoE)
    return blocks;
  if (moe.placement == "layers")
    return llvm::SmallVector<int64_t>(moe.layers.begin(), moe.layers.end());
  // every-n: blocks n-1, 2n-1, ... (V-MoE's "Every n"); every-2 is n = 2.
  int64_t step = moe.placement == "every-n" ? moe.every : 2;
  for (int64_t i = step - 1; i < depth; i += step)
    blocks.push_back(i);
  if (moe.placement == "last-n" &&
      static_cast<int64_t>(blocks.size()) > moe.lastN)
    blocks.erase(blocks.begin(), blocks.end() - moe.lastN);
  return blocks;
}

bool ModelDescription::isMoEBlock(int64_t i) const {
  return llvm::is_contained(moeBlocks(), i);
}

MoESettings ModelDescription::layerSettings(int64_t block) const {
  MoESettings layer = moe;
  layer.overrides.clear();
  for (const MoEOverride &entry : moe.overrides) {
    if (!llvm::is_contained(entry.blocks, block))
      continue;
    layer.routing = entry.routing.value_or(layer.routing);
    layer.k = entry.k.value_or(layer.k);
    layer.score = entry.score.value_or(layer.score);
    layer.order = entry.order.value_or(layer.order);
    layer.normalize = entry.normalize.value_or(layer.normalize);
    layer.capacityRule = entry.capacityRule.value_or(layer.capacityRule);
    layer.multipleOf = entry.multipleOf.value_or(layer.multipleOf);
    layer.activation = entry.activation.value_or(layer.activation);
    layer.slotsPerExpert = entry.slotsPerExpert.value_or(layer.slotsPerExpert);
    layer.softGroupSize = entry.softGroupSize.value_or(layer.softGroupSize);
  }
  return layer;
}

int64_t ModelDescription::layerTokensPerGroup(const MoESettings &layer) const {
  if (layer.routing == "soft")
    return layer.softGroupSize * tokensPerImage();
  return tokensPerGroup();
}

int64_t ModelDescription::layerSlotsPerExpert(const MoESettings &layer) const {
  if (layer.slotsPerExpert > 0)
    return layer.slotsPerExpert;
  return ::vmoe::computeCapacity(1, layerTokensPerGroup(layer), 1.0,
                                 moe.numExperts,
                                 ::vmoe::CapacityRounding::Round, 1);
}

int64_t WeightTensor::numElements() const {
  return ::vmoe::limits::saturatingProduct(shape);
}

/// `n` rounded up to a multiple of 16, saturating.
static int64_t alignTo16(int64_t n) {
  return ::vmoe::limits::saturatingAdd(n, 15) / 16 * 16;
}

namespace {
/// Appends tensors to a layout, each at the next 16-float boundary.
struct LayoutBuilder {
  std::vector<WeightTensor> layout;
  int64_t offset = 0;

  void add(std::string name, llvm::SmallVector<int64_t> shape) {
    WeightTensor tensor{std::move(name), std::move(shape), offset};
    // Keep every tensor 64-byte aligned for vector loads. Saturating: sizes
    // above the limits are reported by checkWeightSizes, never wrap.
    offset = ::vmoe::limits::saturatingAdd(offset,
                                           alignTo16(tensor.numElements()));
    layout.push_back(std::move(tensor));
  }
  /// A dense layer `prefix`.kernel [in, out] and `prefix`.bias [out].
  void addDense(const std::string &prefix, int64_t in, int64_t out) {
    add(prefix + ".kernel", {in, out});
    add(prefix + ".bias", {out});
  }
  /// A norm layer `prefix`.scale [d], plus `prefix`.bias [d] for
  /// LayerNorm (RMSNorm has no bias).
  void addNorm(const ModelDescription &model, const std::string &prefix,
               int64_t d) {
    add(prefix + ".scale", {d});
    if (model.norm == "layernorm")
      add(prefix + ".bias", {d});
  }
  /// `count` experts `prefix`.w1, b1, w2, b2 (MLP) or `prefix`.w_gate,
  /// w_up, w_down (SwiGLU) of width d and hidden width h.
  void addExperts(const std::string &prefix, llvm::StringRef expert,
                  int64_t count, int64_t d, int64_t h) {
    if (expert == "swiglu") {
      add(prefix + ".w_gate", {count, d, h});
      add(prefix + ".w_up", {count, d, h});
      add(prefix + ".w_down", {count, h, d});
      return;
    }
    add(prefix + ".w1", {count, d, h});
    add(prefix + ".b1", {count, h});
    add(prefix + ".w2", {count, h, d});
    add(prefix + ".b2", {count, d});
  }
};
} // namespace

/// The multihead attention pooling head (head "map").
static void addMAPHead(LayoutBuilder &l, const ModelDescription &model) {
  int64_t d = model.modelWidth;
  l.add("map.probe", {1, d});
  l.addDense("map.attn.q", d, d);
  l.addDense("map.attn.kv", d, 2 * d);
  l.addDense("map.attn.out", d, d);
  l.addNorm(model, "map.ln", d);
  l.addDense("map.mlp.fc1", d, model.mlpDim);
  l.addDense("map.mlp.fc2", model.mlpDim, d);
}

std::vector<WeightTensor>
mlir::vmoe::frontend::weightLayout(const ModelDescription &model) {
  LayoutBuilder l;
  int64_t d = model.modelWidth, h = model.mlpDim, e = model.moe.numExperts;
  int64_t he = model.expertMlpDim();
  l.addDense("embedding", model.channels * model.patchHeight * model.patchWidth,
             d);
  if (model.head == "token")
    l.add("cls_token", {1, d});
  l.add("pos_embedding", {model.tokensPerImage(), d});
  for (int64_t i = 0; i < model.depth; ++i) {
    std::string block = "blocks." + std::to_string(i) + ".";
    l.addNorm(model, block + "ln1", d);
    l.addDense(block + "attn.qkv", d, 3 * d);
    l.addDense(block + "attn.out", d, d);
    l.addNorm(model, block + "ln2", d);
    bool isMoE = model.isMoEBlock(i);
    if (isMoE && model.layerSettings(i).routing == "soft") {
      MoESettings layer = model.layerSettings(i);
      l.add(block + "moe.phi", {d, e, model.layerSlotsPerExpert(layer)});
      l.add(block + "moe.scale", {});
      l.addExperts(block + "moe", "mlp", e, d, he);
    } else if (isMoE) {
      l.add(block + "moe.router.kernel", {d, e});
      l.addExperts(block + "moe", model.moe.expert, e, d, he);
    }
    if (isMoE && model.moe.sharedExperts > 0)
      l.addExperts(block + "moe.shared", model.moe.expert,
                   model.moe.sharedExperts, d, he);
    if (!isMoE) {
      l.addDense(block + "mlp.fc1", d, h);
      l.addDense(block + "mlp.fc2", h, d);
    }
  }
  l.addNorm(model, "final_ln", d);
  if (model.head == "map")
    addMAPHead(l, model);
  if (model.representationSize)
    l.addDense("pre_logits", d, model.representationSize);
  l.addDense("head", model.headInputWidth(), model.classes);
  return std::move(l.layout);
}

int64_t
mlir::vmoe::frontend::weightsSize(const std::vector<WeightTensor> &layout) {
  if (layout.empty())
    return 0;
  const WeightTensor &last = layout.back();
  return ::vmoe::limits::saturatingAdd(last.offset,
                                      alignTo16(last.numElements()));
}
