//===- Manifest.cpp - Manifest of a compiled vmoe model -------------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Parses the manifest with llvm::json and checks every field, so that sizes
// derived from it (buffers, strides, statistics) cannot overflow and every
// tensor lies inside the weights buffer. The first problem found is reported
// with the path of its field. Fields the runtime does not know (such as the
// informational "routing" vmoe-compile adds) are ignored: the version field
// marks incompatible changes.
//
//===----------------------------------------------------------------------===//

#include "Manifest.h"

#include "../BF16Panels.h"

#include "vmoe/Support/BoundedJson.h"
#include "vmoe/Support/Limits.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <optional>

using namespace vmoe;
using namespace vmoe::runtime;
using llvm::StringRef;
using llvm::Twine;
namespace json = llvm::json;

/// Bound on every element count the manifest implies (2^40 floats = 4 TiB),
/// far above any real model, low enough that products of two bounded counts
/// stay representable.
static constexpr int64_t kMaxElements = vmoe::limits::kMaxTensorElements;

namespace {

/// Reads the fields of one JSON object and records the first error (with
/// the field's path) in a string shared by all readers of one manifest.
class ObjectReader {
public:
  ObjectReader(const json::Object &object, std::string path, std::string &error)
      : object(object), path(std::move(path)), error(error) {}

  /// The path of field `key`, e.g. "moe_layers[0].k".
  std::string fieldPath(StringRef key) const {
    return path.empty() ? key.str() : path + "." + key.str();
  }

  /// Records "<path.key>: <message>" unless an error is already recorded.
  void fail(StringRef key, const Twine &message) {
    if (error.empty())
      error = fieldPath(key) + ": " + message.str();
  }

  /// Whether the object has field `key`.
  bool has(StringRef key) const { return object.get(key) != nullptr; }

  /// The value of a required field, or null after recording an error.
  const json::Value *get(StringRef key) {
    const json::Value *value = object.get(key);
    if (!value)
      fail(key, "missing");
    return value;
  }

  /// A required integer in [min, max].
  std::optional<int64_t> getInt(StringRef key, int64_t min,
                                int64_t max = kMaxElements) {
    const json::Value *value = get(key);
    if (!value)
      return std::nullopt;
    std::optional<int64_t> result = value->getAsInteger();
    if (!result) {
      fail(key, "must be an integer");
      return std::nullopt;
    }
    if (*result < min || *result > max) {
      fail(key, "must be in [" + Twine(min) + ", " + Twine(max) + "], got " +
                    Twine(*result));
      return std::nullopt;
    }
    return result;
  }

  /// A required finite number in (0, max].
  std::optional<double> getPositiveNumber(StringRef key, double max) {
    const json::Value *value = get(key);
    if (!value)
      return std::nullopt;
    std::optional<double> result = value->getAsNumber();
    if (!result || !std::isfinite(*result) || !(*result > 0)) {
      fail(key, "must be a finite number > 0");
      return std::nullopt;
    }
    if (*result > max) {
      fail(key, "must be <= " + formatShortest(max) + ", got " +
                    formatShortest(*result));
      return std::nullopt;
    }
    return result;
  }

  /// A required string.
  std::optional<StringRef> getString(StringRef key) {
    const json::Value *value = get(key);
    if (!value)
      return std::nullopt;
    std::optional<StringRef> result = value->getAsString();
    if (!result)
      fail(key, "must be a string");
    return result;
  }

  /// A required array, or null after recording an error.
  const json::Array *getArray(StringRef key) {
    const json::Value *value = get(key);
    if (!value)
      return nullptr;
    const json::Array *result = value->getAsArray();
    if (!result)
      fail(key, "must be an array");
    return result;
  }

  /// A required object, or null after recording an error.
  const json::Object *getObject(StringRef key) {
    const json::Value *value = get(key);
    if (!value)
      return nullptr;
    const json::Object *result = value->getAsObject();
    if (!result)
      fail(key, "must be an object");
    return result;
  }

private:
  const json::Object &object;
  std::string path;
  std::string &error;
};

} // namespace

/// Reads `count` float32 numbers from array field `key` (finite, and nonzero
/// when `nonzero`) into `out`.
static void readChannelValues(ObjectReader &reader, StringRef key,
                              int64_t count, bool nonzero,
                              llvm::SmallVectorImpl<float> &out) {
  const json::Array *array = reader.getArray(key);
  if (!array)
    return;
  if (static_cast<int64_t>(array->size()) != count) {
    reader.fail(key, "must have " + Twine(count) + " values (one per " +
                         "channel), got " + Twine(array->size()));
    return;
  }
  for (const auto &[index, value] : llvm::enumerate(*array)) {
    std::optional<double> number = value.getAsNumber();
    auto asFloat = static_cast<float>(number.value_or(0));
    if (!number || !std::isfinite(asFloat) || (nonzero && asFloat == 0)) {
      reader.fail((key + "[" + Twine(index) + "]").str(),
                  nonzero ? "must be a finite nonzero number"
                          : "must be a finite number");
      return;
    }
    out.push_back(asFloat);
  }
}

/// The routings a MoE layer may have.
static constexpr StringRef kLayerRoutings[] = {"vanilla", "bpr",
                                               "expert_choice", "soft"};

/// Reads one entry of "moe_layers".
static std::optional<MoELayerInfo>
readMoELayer(const json::Value &value, std::string path, std::string &error) {
  const json::Object *object = value.getAsObject();
  if (!object) {
    if (error.empty())
      error = path + ": must be an object";
    return std::nullopt;
  }
  ObjectReader reader(*object, path, error);
  MoELayerInfo layer;
  std::optional<int64_t> block = reader.getInt("block", 0);
  std::optional<int64_t> numExperts = reader.getInt("num_experts", 1, 1 << 20);
  std::optional<int64_t> k = reader.getInt("k", 1, 1 << 20);
  std::optional<int64_t> tokens = reader.getInt("tokens_per_group", 1);
  std::optional<StringRef> rule = reader.getString("capacity_rule");
  std::optional<int64_t> multipleOf = reader.getInt("multiple_of", 1);
  std::optional<int64_t> maxCapacity = reader.getInt("max_capacity", 1);
  std::optional<int64_t> fixed;
  if (object->get("capacity"))
    fixed = reader.getInt("capacity", 1);
  if (!error.empty())
    return std::nullopt;
  if (fixed && *fixed != *maxCapacity) {
    reader.fail("capacity", "must equal max_capacity (" + Twine(*maxCapacity) +
                                "), got " + Twine(*fixed));
    return std::nullopt;
  }
  // "routing" is optional (manifests before expert choice and Soft MoE).
  if (object->get("routing")) {
    std::optional<StringRef> routing = reader.getString("routing");
    if (!routing)
      return std::nullopt;
    if (!llvm::is_contained(kLayerRoutings, *routing)) {
      reader.fail("routing", "must be \"vanilla\", \"bpr\", "
                             "\"expert_choice\" or \"soft\", got \"" +
                                 *routing + "\"");
      return std::nullopt;
    }
    layer.routing = routing->str();
  }
  if (*k > *numExperts) {
    reader.fail("k", "must be <= num_experts (" + Twine(*numExperts) +
                         "), got " + Twine(*k));
    return std::nullopt;
  }
  if (*rule != "round" && *rule != "ceil") {
    reader.fail("capacity_rule",
                "must be \"round\" or \"ceil\", got \"" + *rule + "\"");
    return std::nullopt;
  }
  layer.block = *block;
  layer.numExperts = *numExperts;
  layer.k = *k;
  layer.tokensPerGroup = *tokens;
  layer.rule =
      *rule == "ceil" ? CapacityRounding::Ceil : CapacityRounding::Round;
  layer.multipleOf = *multipleOf;
  layer.maxCapacity = *maxCapacity;
  layer.fixedCapacity = fixed.value_or(0);
  return layer;
}

/// Reads one entry of "tensors".
static std::optional<TensorInfo>
readTensor(const json::Value &value, std::string path, std::string &error) {
  const json::Object *object = value.getAsObject();
  if (!object) {
    if (error.empty())
      error = path + ": must be an object";
    return std::nullopt;
  }
  ObjectReader reader(*object, path, error);
  std::optional<StringRef> name = reader.getString("name");
  const json::Array *shape = reader.getArray("shape");
  std::optional<int64_t> offset = reader.getInt("offset", 0);
  if (!error.empty())
    return std::nullopt;
  if (name->empty()) {
    reader.fail("name", "must not be empty");
    return std::nullopt;
  }
  if (*offset % 16 != 0) {
    reader.fail("offset", "must be a multiple of 16, got " + Twine(*offset));
    return std::nullopt;
  }
  TensorInfo tensor;
  tensor.name = name->str();
  tensor.offset = *offset;
  if (const json::Value *sharded = object->get("expert_sharded")) {
    std::optional<bool> flag = sharded->getAsBoolean();
    if (!flag) {
      reader.fail("expert_sharded", "must be a boolean");
      return std::nullopt;
    }
    tensor.expertSharded = *flag;
  }
  tensor.numElements = 1;
  for (const auto &[index, dimValue] : llvm::enumerate(*shape)) {
    std::optional<int64_t> dim = dimValue.getAsInteger();
    int64_t product = 0;
    if (!dim || *dim < 0 ||
        llvm::MulOverflow(tensor.numElements, *dim, product) ||
        product > kMaxElements) {
      reader.fail(("shape[" + Twine(index) + "]").str(),
                  "must be an integer >= 0 (at most 2^40 elements in all)");
      return std::nullopt;
    }
    tensor.shape.push_back(*dim);
    tensor.numElements = product;
  }
  if (object->get("panel_width")) {
    std::optional<int64_t> width = reader.getInt("panel_width", 1, 1024);
    if (!width)
      return std::nullopt;
    if (object->get("panel_storage")) {
      std::optional<StringRef> storage = reader.getString("panel_storage");
      if (!storage)
        return std::nullopt;
      if (*storage != "f32" && *storage != "bf16_pairs") {
        std::string got = "\"" + storage->str() + "\"";
        reader.fail("panel_storage",
                    "must be \"f32\" or \"bf16_pairs\", got " + got);
        return std::nullopt;
      }
      tensor.bf16Pairs = *storage == "bf16_pairs";
    }
    // bf16 pairs pad N to whole panels and K to pairs, within the tensor's
    // f32 region; f32 panels are packed in place, whole panels only.
    bool rank2 = tensor.shape.size() >= 2;
    if (tensor.bf16Pairs && rank2) {
      tensor.panelWidth = *width;
      if (bf16PanelWords(tensor) > tensor.numElements) {
        std::string size = std::to_string(tensor.numElements);
        reader.fail("panel_storage", "bf16 pair panels of width " +
                                         Twine(*width) + " do not fit the " +
                                         size + " floats of the tensor");
        return std::nullopt;
      }
    } else if (!rank2 || tensor.shape.back() % *width != 0) {
      reader.fail("panel_width",
                  "must divide the last dim of a tensor of rank >= 2, got " +
                      Twine(*width));
      return std::nullopt;
    }
    tensor.panelWidth = *width;
  }
  return tensor;
}

/// Checks that the tensors have distinct names and lie, without overlapping,
/// inside the weights buffer.
static void checkTensorLayout(const Manifest &manifest, std::string &error) {
  llvm::StringSet<> names;
  for (const auto &[index, tensor] : llvm::enumerate(manifest.tensors)) {
    std::string path = "tensors[" + std::to_string(index) + "]";
    if (!names.insert(tensor.name).second) {
      error = path + ".name: duplicate tensor '" + tensor.name + "'";
      return;
    }
    if (tensor.offset + tensor.numElements > manifest.weightsSize) {
      error = path + ": tensor '" + tensor.name + "' (offset " +
              std::to_string(tensor.offset) + ", " +
              std::to_string(tensor.numElements) +
              " floats) ends past weights_size (" +
              std::to_string(manifest.weightsSize) + ")";
      return;
    }
  }
  std::vector<const TensorInfo *> byOffset;
  for (const TensorInfo &tensor : manifest.tensors)
    byOffset.push_back(&tensor);
  // Ties broken by position: a deterministic order without stable_sort.
  llvm::sort(byOffset, [](const TensorInfo *a, const TensorInfo *b) {
    return a->offset != b->offset ? a->offset < b->offset : a < b;
  });
  for (size_t i = 1; i < byOffset.size(); ++i) {
    const TensorInfo &previous = *byOffset[i - 1];
    if (previous.offset + previous.numElements > byOffset[i]->offset) {
      error = "tensors: tensor '" + byOffset[i]->name + "' (offset " +
              std::to_string(byOffset[i]->offset) + ") overlaps tensor '" +
              previous.name + "' (offset " + std::to_string(previous.offset) +
              ", " + std::to_string(previous.numElements) + " floats)";
      return;
    }
  }
}

/// Fills `manifest` from the top-level object; records the first error.
static void readManifest(const json::Object &object, Manifest &manifest,
                         std::string &error) {
  ObjectReader reader(object, "", error);
  std::optional<StringRef> format = reader.getString("format");
  if (format && *format != "vmoe-compiled-model")
    reader.fail("format",
                "must be \"vmoe-compiled-model\", got \"" + *format + "\"");
  std::optional<int64_t> version = reader.getInt("version", 0);
  if (version && *version != 1)
    reader.fail("version", "must be 1, got " + Twine(*version));
  if (std::optional<StringRef> name = reader.getString("name"))
    manifest.name = name->str();
  if (const json::Value *target = object.get("target")) {
    std::optional<StringRef> value = target->getAsString();
    if (!value || (*value != "cpu" && *value != "cuda"))
      reader.fail("target", "must be \"cpu\" or \"cuda\"");
    else
      manifest.target = value->str();
  }
  manifest.batchImages = reader.getInt("batch_images", 1, 1 << 20).value_or(0);
  if (const json::Object *image = reader.getObject("image")) {
    ObjectReader imageReader(*image, "image", error);
    manifest.channels = imageReader.getInt("channels", 1, 1 << 10).value_or(0);
    manifest.height = imageReader.getInt("height", 1, 1 << 16).value_or(0);
    manifest.width = imageReader.getInt("width", 1, 1 << 16).value_or(0);
  }
  manifest.classes = reader.getInt("classes", 1, 1 << 20).value_or(0);
  if (!error.empty())
    return;

  // Optional input normalization, default mean 0 and std 1.
  manifest.mean.assign(manifest.channels, 0.0f);
  manifest.std.assign(manifest.channels, 1.0f);
  if (reader.has("input")) {
    if (const json::Object *input = reader.getObject("input")) {
      ObjectReader inputReader(*input, "input", error);
      if (inputReader.has("mean")) {
        manifest.mean.clear();
        readChannelValues(inputReader, "mean", manifest.channels,
                          /*nonzero=*/false, manifest.mean);
      }
      if (inputReader.has("std")) {
        manifest.std.clear();
        readChannelValues(inputReader, "std", manifest.channels,
                          /*nonzero=*/true, manifest.std);
      }
    }
  }

  // Optional preprocessing, checked as the front end checks it.
  manifest.preprocess = defaultPreprocess(manifest.height, manifest.width);
  if (reader.has("preprocess") && error.empty()) {
    if (std::optional<StringRef> text = reader.getString("preprocess")) {
      llvm::Expected<PreprocessSpec> spec = parsePreprocess(*text);
      llvm::Error problem =
          spec ? checkPreprocess(*spec, manifest.channels, manifest.height,
                                 manifest.width)
               : spec.takeError();
      if (problem)
        reader.fail("preprocess", llvm::toString(std::move(problem)));
      else
        manifest.preprocess = std::move(*spec);
    }
  }

  // Optional class names; an empty array means none.
  if (reader.has("class_names")) {
    if (const json::Array *names = reader.getArray("class_names")) {
      if (!names->empty() &&
          static_cast<int64_t>(names->size()) != manifest.classes) {
        reader.fail("class_names", "must have " + Twine(manifest.classes) +
                                       " names (classes), got " +
                                       Twine(names->size()));
      } else {
        for (const auto &[index, value] : llvm::enumerate(*names)) {
          std::optional<StringRef> name = value.getAsString();
          if (!name) {
            reader.fail(("class_names[" + Twine(index) + "]").str(),
                        "must be a string");
            break;
          }
          manifest.classNames.push_back(name->str());
        }
      }
    }
  }

  manifest.capacityRatio =
      reader.getPositiveNumber("capacity_ratio", limits::kMaxCapacityRatio).value_or(0);
  manifest.maxCapacityRatio =
      reader.getPositiveNumber("max_capacity_ratio",
                                 limits::kMaxCapacityRatio).value_or(0);
  if (!error.empty())
    return;
  if (manifest.capacityRatio > manifest.maxCapacityRatio) {
    reader.fail("capacity_ratio",
                "must be <= max_capacity_ratio (" +
                    formatShortest(manifest.maxCapacityRatio) + "), got " +
                    formatShortest(manifest.capacityRatio));
    return;
  }

  if (const json::Array *layers = reader.getArray("moe_layers")) {
    for (const auto &[index, value] : llvm::enumerate(*layers)) {
      std::string path = "moe_layers[" + std::to_string(index) + "]";
      std::optional<MoELayerInfo> layer = readMoELayer(value, path, error);
      if (!layer)
        return;
      if (!manifest.moeLayers.empty() &&
          layer->numExperts != manifest.moeLayers.front().numExperts) {
        error = path + ".num_experts: must equal that of moe_layers[0] (" +
                std::to_string(manifest.moeLayers.front().numExperts) +
                "), got " + std::to_string(layer->numExperts);
        return;
      }
      manifest.moeLayers.push_back(*layer);
    }
  }

  manifest.weightsSize =
      reader.getInt("weights_size", 0, limits::kMaxTotalWeights).value_or(0);
  // Optional: manifests before expert parallelism have none.
  if (reader.has("expert_parallel"))
    manifest.expertParallel =
        reader.getInt("expert_parallel", 0, 1 << 20).value_or(0);
  // Optional: inference graphs before training graphs have none.
  if (const json::Value *training = object.get("training")) {
    std::optional<bool> value = training->getAsBoolean();
    if (!value)
      reader.fail("training", "must be true or false");
    manifest.training = value.value_or(false);
  }
  if (const json::Array *tensors = reader.getArray("tensors")) {
    for (const auto &[index, value] : llvm::enumerate(*tensors)) {
      std::optional<TensorInfo> tensor =
          readTensor(value, "tensors[" + std::to_string(index) + "]", error);
      if (!tensor)
        return;
      manifest.tensors.push_back(std::move(*tensor));
    }
  }
  if (!error.empty())
    return;

  // The bounds above keep these products far from overflowing.
  if (manifest.imageSize() * manifest.batchImages > kMaxElements) {
    error = "batch_images: a batch of " + std::to_string(manifest.batchImages) +
            " images of " + std::to_string(manifest.imageSize()) +
            " floats is too large";
    return;
  }
  checkTensorLayout(manifest, error);
}

llvm::Expected<Manifest> vmoe::runtime::parseManifest(StringRef json) {
  llvm::Expected<json::Value> value = vmoe::parseBoundedJson(json);
  if (!value)
    return llvm::createStringError("manifest: not valid JSON: " +
                                   llvm::toString(value.takeError()));
  const json::Object *object = value->getAsObject();
  if (!object)
    return llvm::createStringError("manifest: not a JSON object");
  Manifest manifest;
  std::string error;
  readManifest(*object, manifest, error);
  if (!error.empty())
    return llvm::createStringError("manifest: " + error);
  return manifest;
}
