//===- vmoe_runtime.cpp - C API of compiled vmoe models -------------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Implements include/vmoe/Runtime/vmoe_runtime.h over vmoe::runtime::Model:
// argument checks for every entry point (NULL, negative sizes), llvm::Error
// turned into a one-line message in the caller's buffer, and the OpenMP
// thread count.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Runtime/vmoe_runtime.h"

#include "BufferCache.h"
#include "Model.h"
#include "ModelInterface.h"

#include "vmoe/Support/Limits.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cstring>

using namespace vmoe::runtime;
using llvm::StringRef;

extern "C" {
// libomp, declared here so that no omp.h is needed to build the runtime.
void omp_set_num_threads(int threads);
int omp_get_max_threads(void);
}

/// The opaque handle of the C API.
struct vmoe_model {
  std::unique_ptr<Model> model;
};

/// Copies `message` into the caller's buffer as one NUL-terminated line,
/// truncated to `size` bytes.
static void setError(char *error, size_t size, StringRef message) {
  if (!error || size == 0)
    return;
  size_t length = std::min(message.size(), size - 1);
  std::memcpy(error, message.data(), length);
  std::replace(error, error + length, '\n', ' ');
  error[length] = '\0';
}

/// Reports `error` into the caller's buffer; returns 1 for failure.
static int report(llvm::Error error, char *buffer, size_t size) {
  setError(buffer, size, llvm::toString(std::move(error)));
  return 1;
}

vmoe_model *vmoe_model_load(const char *weights_path, char *error,
                            size_t error_size) {
  setError(error, error_size, "");
  if (!weights_path) {
    setError(error, error_size, "no weights file given");
    return nullptr;
  }
  const char *manifest = vmoe_model_manifest();
  if (!manifest) {
    setError(error, error_size, "manifest: the model object returned none");
    return nullptr;
  }
  llvm::Expected<std::unique_ptr<Model>> model =
      Model::load(manifest, weights_path);
  if (!model) {
    report(model.takeError(), error, error_size);
    return nullptr;
  }
  return new vmoe_model{std::move(*model)};
}

void vmoe_model_free(vmoe_model *model) {
  delete model;
  // The buffers the forward pass kept for its next call (BufferCache.h).
  vmoe::runtime::releaseCachedBuffers();
}

/// The manifest of `model`, or null.
static const Manifest *getManifest(const vmoe_model *model) {
  return model && model->model ? &model->model->getManifest() : nullptr;
}

const char *vmoe_model_name(const vmoe_model *model) {
  const Manifest *manifest = getManifest(model);
  return manifest ? manifest->name.c_str() : "";
}

int64_t vmoe_model_batch_images(const vmoe_model *model) {
  const Manifest *manifest = getManifest(model);
  return manifest ? manifest->batchImages : 0;
}

int64_t vmoe_model_channels(const vmoe_model *model) {
  const Manifest *manifest = getManifest(model);
  return manifest ? manifest->channels : 0;
}

int64_t vmoe_model_height(const vmoe_model *model) {
  const Manifest *manifest = getManifest(model);
  return manifest ? manifest->height : 0;
}

int64_t vmoe_model_width(const vmoe_model *model) {
  const Manifest *manifest = getManifest(model);
  return manifest ? manifest->width : 0;
}

int64_t vmoe_model_classes(const vmoe_model *model) {
  const Manifest *manifest = getManifest(model);
  return manifest ? manifest->classes : 0;
}

const char *vmoe_model_class_name(const vmoe_model *model, int64_t index) {
  const Manifest *manifest = getManifest(model);
  if (!manifest || index < 0 ||
      index >= static_cast<int64_t>(manifest->classNames.size()))
    return nullptr;
  return manifest->classNames[index].c_str();
}

int64_t vmoe_model_num_moe_layers(const vmoe_model *model) {
  const Manifest *manifest = getManifest(model);
  return manifest ? static_cast<int64_t>(manifest->moeLayers.size()) : 0;
}

int64_t vmoe_model_num_experts(const vmoe_model *model) {
  const Manifest *manifest = getManifest(model);
  return manifest ? manifest->numExperts() : 0;
}

int64_t vmoe_model_moe_block(const vmoe_model *model, int64_t layer) {
  const Manifest *manifest = getManifest(model);
  if (!manifest || layer < 0 ||
      layer >= static_cast<int64_t>(manifest->moeLayers.size()))
    return -1;
  return manifest->moeLayers[layer].block;
}

const char *vmoe_model_moe_routing(const vmoe_model *model, int64_t layer) {
  const Manifest *manifest = getManifest(model);
  if (!manifest || layer < 0 ||
      layer >= static_cast<int64_t>(manifest->moeLayers.size()))
    return nullptr;
  return manifest->moeLayers[layer].routing.c_str();
}

int64_t vmoe_model_stats_size(const vmoe_model *model) {
  const Manifest *manifest = getManifest(model);
  return manifest ? manifest->statsSize() : 0;
}

double vmoe_model_default_capacity_ratio(const vmoe_model *model) {
  const Manifest *manifest = getManifest(model);
  return manifest ? manifest->capacityRatio : 0;
}

double vmoe_model_max_capacity_ratio(const vmoe_model *model) {
  const Manifest *manifest = getManifest(model);
  return manifest ? manifest->maxCapacityRatio : 0;
}

int vmoe_model_check_capacity_ratio(const vmoe_model *model,
                                    double capacity_ratio, char *error,
                                    size_t error_size) {
  setError(error, error_size, "");
  if (!getManifest(model)) {
    setError(error, error_size, "no model given");
    return 1;
  }
  if (llvm::Error failure = model->model->checkCapacityRatio(capacity_ratio))
    return report(std::move(failure), error, error_size);
  return 0;
}

int vmoe_model_set_padding(vmoe_model *model, int padding, char *error,
                           size_t error_size) {
  setError(error, error_size, "");
  if (!getManifest(model)) {
    setError(error, error_size, "no model given");
    return 1;
  }
  if (padding != VMOE_PADDING_MASKED && padding != VMOE_PADDING_ZEROS) {
    setError(error, error_size,
             ("unknown padding mode " + llvm::Twine(padding) +
              " (VMOE_PADDING_MASKED or VMOE_PADDING_ZEROS)")
                 .str()
                 .c_str());
    return 1;
  }
  model->model->setPadding(padding == VMOE_PADDING_ZEROS ? Padding::Zeros
                                                         : Padding::Masked);
  return 0;
}

int vmoe_model_get_padding(const vmoe_model *model) {
  if (!getManifest(model))
    return -1;
  return model->model->getPadding() == Padding::Zeros ? VMOE_PADDING_ZEROS
                                                      : VMOE_PADDING_MASKED;
}

int vmoe_model_set_threads(int threads) {
  if (threads < 1 || threads > vmoe::limits::kMaxThreads)
    return 1;
  omp_set_num_threads(threads);
  return 0;
}

int vmoe_model_get_threads(void) { return omp_get_max_threads(); }

int vmoe_load_image(const vmoe_model *model, const char *path,
                    float *pixels, char *error, size_t error_size) {
  setError(error, error_size, "");
  if (!getManifest(model) || !path || !pixels) {
    setError(error, error_size,
             !getManifest(model) ? "no model given"
             : !path             ? "no image path given"
                                 : "no pixel buffer given");
    return 1;
  }
  if (llvm::Error failure = model->model->readImage(path, pixels))
    return report(std::move(failure), error, error_size);
  return 0;
}

int vmoe_load_png(const vmoe_model *model, const char *path, float *pixels,
                  char *error, size_t error_size) {
  return vmoe_load_image(model, path, pixels, error, error_size);
}

int vmoe_model_is_training(const vmoe_model *model) {
  const Manifest *manifest = getManifest(model);
  return manifest && manifest->training ? 1 : 0;
}

int64_t vmoe_model_losses(const vmoe_model *model, double *losses) {
  if (!getManifest(model) || !losses)
    return 0;
  llvm::ArrayRef<double> means = model->model->getLossMeans();
  std::copy(means.begin(), means.end(), losses);
  return static_cast<int64_t>(means.size());
}

int vmoe_model_forward(vmoe_model *model, const float *images, int64_t n,
                       double capacity_ratio, float *logits, int32_t *stats,
                       char *error, size_t error_size) {
  setError(error, error_size, "");
  if (!getManifest(model)) {
    setError(error, error_size, "no model given");
    return 1;
  }
  if (llvm::Error failure =
          model->model->forward(images, n, capacity_ratio, logits, stats))
    return report(std::move(failure), error, error_size);
  return 0;
}
