//===- Model.cpp - A compiled vmoe model with its weights -----------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Batching around the compiled forward function: each batch is copied into
// an aligned buffer (padding images are all zero after normalization, as
// in the original V-MoE evaluation, and masked out of routing unless the
// padding mode is Zeros), run
// with memref descriptors of the shapes the manifest gives, and its logits
// and statistics copied out. The capacity ratio is checked first with the
// rule of Capacity.h, so the compiled code never sees a ratio its buffers
// cannot hold.
//
//===----------------------------------------------------------------------===//

#include "Model.h"

#include "BF16Panels.h"
#include "Distributed.h"
#include "Formats/ImageFile.h"
#include "Formats/Safetensors.h"
#include "ModelInterface.h"
#include "Preprocess.h"
#include "StreamingStores.h"

#include "vmoe/Dialect/VMoE/IR/Capacity.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace vmoe;
using namespace vmoe::runtime;
using llvm::StringRef;
using llvm::Twine;

/// "<what>: <first GPU error>".
static llvm::Error cudaError(const Twine &what) {
  char error[512] = "unknown GPU error";
  vmoe_cuda_last_error(error, sizeof(error));
  return llvm::createStringError(what + ": " + error);
}

llvm::Expected<std::unique_ptr<Model>> Model::load(StringRef manifestJson,
                                                   StringRef weightsPath) {
  llvm::Expected<Manifest> manifest = parseManifest(manifestJson);
  if (!manifest)
    return manifest.takeError();
  std::unique_ptr<Model> model(new Model());
  model->manifest = std::move(*manifest);
  const Manifest &m = model->manifest;

  // A CUDA model reads its buffers from kernels: device memory, with the
  // weights uploaded once here.
  bool device = m.target == "cuda";
  if (device) {
    if (!hasCudaRuntime())
      return llvm::createStringError(
          "this model runs on CUDA but the executable lacks the GPU runtime");
    char error[512];
    if (vmoe_cuda_available(error, sizeof(error)) != 0)
      return llvm::createStringError(Twine("no usable GPU: ") + error);
  }
  // An expert parallel model reads only its rank's experts: the rest of
  // the expert tensors is never written or read, so it is not zeroed
  // (those pages stay unmapped).
  int rank = 0, ranks = 1;
  Distribution *distribution = getDistribution();
  if (m.expertParallel > 0) {
    int processes = distribution ? distribution->size() : 1;
    if (!distribution || processes != m.expertParallel)
      return llvm::createStringError(
          "this model splits its experts over " + Twine(m.expertParallel) +
          " processes (--expert-parallel); run it with mpirun -np " +
          Twine(m.expertParallel) + ", not " + Twine(processes) +
          " process(es)");
    rank = distribution->rank();
    ranks = processes;
  }
  if (!model->weights.allocate(m.weightsSize,
                               /*zero=*/m.expertParallel == 0))
    return llvm::createStringError("cannot allocate " + Twine(m.weightsSize) +
                                   " floats for the weights");
  if (!model->batchImages.allocate(m.batchImages * m.imageSize()) ||
      !model->batchLogits.allocate(m.batchImages * m.classes) ||
      !model->batchStats.allocate(m.statsSize()) ||
      (m.training && !model->batchLosses.allocate(m.lossesSize())))
    return llvm::createStringError("cannot allocate the batch buffers");
  if (llvm::Error error = loadSafetensors(weightsPath, m, model->weights.get(),
                                         rank, ranks))
    return std::move(error);
  if (distribution) {
    distribution->weightBytesRead = distribution->expertBytesRead = 0;
    for (const TensorInfo &tensor : m.tensors) {
      int64_t bytes = tensor.numElements * static_cast<int64_t>(sizeof(float));
      if (tensor.expertSharded)
        distribution->expertBytesRead += bytes / ranks;
      distribution->weightBytesRead +=
          tensor.expertSharded ? bytes / ranks : bytes;
    }
  }
  for (const TensorInfo &tensor : m.tensors) {
    if (tensor.bf16Pairs)
      packBF16Panels(model->weights.get() + tensor.offset, tensor);
    else if (tensor.panelWidth)
      packPanels(model->weights.get() + tensor.offset, tensor);
  }
  if (device) {
    Model &d = *model;
    if (!d.deviceWeights.allocate(m.weightsSize) ||
        !d.deviceWeights.upload(d.weights.get(), m.weightsSize) ||
        !d.deviceImages.allocate(d.batchImages.length()) ||
        !d.deviceLogits.allocate(d.batchLogits.length()) ||
        !d.deviceStats.allocate(d.batchStats.length()))
      return cudaError("cannot place the model on the GPU");
    d.weights.release();
  }
  return model;
}

/// Constant weights packed once: [..., K, N] -> [..., N/L, K, L] in place,
/// the layout the expert GEMMs stream their weights in (ModelFormat §5).
void Model::packPanels(float *data, const TensorInfo &tensor) {
  int64_t k = tensor.shape[tensor.shape.size() - 2];
  int64_t n = tensor.shape.back(), l = tensor.panelWidth;
  int64_t matrix = k * n;
  std::vector<float> plain(matrix);
  for (int64_t start = 0; start < tensor.numElements; start += matrix) {
    float *w = data + start;
    std::copy(w, w + matrix, plain.begin());
    for (int64_t p = 0; p < n / l; ++p)
      for (int64_t row = 0; row < k; ++row)
        std::copy_n(plain.data() + row * n + p * l, l,
                    w + (p * k + row) * l);
  }
}

llvm::Error Model::checkCapacityRatio(double ratio) const {
  std::string text = "capacity ratio " + formatShortest(ratio);
  if (!std::isfinite(ratio) || !(ratio > 0))
    return llvm::createStringError(text + " must be a finite number > 0");
  if (ratio > manifest.maxCapacityRatio)
    return llvm::createStringError(text + " exceeds the maximum " +
                                   formatShortest(manifest.maxCapacityRatio) +
                                   " the model was compiled for");
  for (const MoELayerInfo &layer : manifest.moeLayers) {
    // Soft MoE and a fixed capacity do not depend on the ratio.
    if (!layer.hasCapacity())
      continue;
    int64_t capacity =
        computeCapacity(layer.k, layer.tokensPerGroup, ratio, layer.numExperts,
                        layer.rule, layer.multipleOf);
    if (capacity < 1)
      return llvm::createStringError(
          text + " rounds to 0 slots in MoE block " + Twine(layer.block) +
          " (" +
          describeRawCapacity(layer.k, layer.tokensPerGroup, ratio,
                              layer.numExperts) +
          ")");
    if (capacity > layer.maxCapacity)
      return llvm::createStringError(text + " needs " + Twine(capacity) +
                                     " slots per expert in MoE block " +
                                     Twine(layer.block) + ", more than the " +
                                     Twine(layer.maxCapacity) +
                                     " the model was compiled for");
  }
  return llvm::Error::success();
}

llvm::Error Model::readImage(StringRef path, float *pixels) const {
  InputFormat format;
  format.channels = manifest.channels;
  format.height = manifest.height;
  format.width = manifest.width;
  format.mean = manifest.mean;
  format.std = manifest.std;
  format.spec = &manifest.preprocess;
  llvm::Expected<DecodedImage> image =
      readImageFile(path, manifest.channels, manifest.preprocess.precise);
  if (!image)
    return image.takeError();
  if (llvm::Error error = preprocessImage(*image, format, pixels))
    return llvm::createStringError(path + ": " +
                                   llvm::toString(std::move(error)));
  return llvm::Error::success();
}

/// A row-major descriptor of `sizes` over `data`.
template <typename T, int Rank>
static MemRefDescriptor<T, Rank> makeDescriptor(T *data,
                                                const int64_t (&sizes)[Rank]) {
  MemRefDescriptor<T, Rank> descriptor;
  descriptor.allocated = data;
  descriptor.aligned = data;
  descriptor.offset = 0;
  int64_t stride = 1;
  for (int dim = Rank - 1; dim >= 0; --dim) {
    descriptor.sizes[dim] = sizes[dim];
    descriptor.strides[dim] = stride;
    stride *= sizes[dim];
  }
  return descriptor;
}

llvm::Error Model::runBatch(const float *images, int64_t real,
                            double ratio) {
  const Manifest &m = manifest;
  int64_t batch = m.batchImages, imageSize = m.imageSize();
  int64_t numLayers = static_cast<int64_t>(m.moeLayers.size());
  bool device = m.target == "cuda";
  // A full batch on the CPU is read where it is when it is 64-byte aligned
  // as the interface promises (the compiled function never writes its
  // images: ModelBuilder marks them read-only); any other batch is copied,
  // a partial one padded with zeros.
  float *batchData = batchImages.get();
  if (real == batch && !device &&
      reinterpret_cast<uintptr_t>(images) % AlignedBuffer<float>::kAlignment ==
          0) {
    batchData = const_cast<float *>(images);
  } else {
    if (real > 0)
      std::memcpy(batchData, images, sizeof(float) * real * imageSize);
    std::fill_n(batchData + real * imageSize, (batch - real) * imageSize, 0.0f);
  }
  // A batch without images (a rank with none left) routes nothing in
  // either mode: the one-process run has no such batch.
  int64_t validImages =
      padding == Padding::Masked || real == 0 ? real : batch;
  std::fill_n(batchLogits.get(), batch * m.classes, 0.0f);
  std::fill_n(batchStats.get(), m.statsSize(), 0);
  if (m.training)
    std::fill_n(batchLosses.get(), m.lossesSize(), 0.0f);

  // A CUDA model: the batch goes to the device once, the compiled code
  // runs its kernels on one stream and waits for them once at its end,
  // and logits and statistics come back once.
  if (device && (!deviceImages.upload(batchData, batchImages.length()) ||
                 !deviceLogits.upload(batchLogits.get(),
                                      batchLogits.length()) ||
                 !deviceStats.upload(batchStats.get(), batchStats.length())))
    return cudaError("GPU");
  F32x4 imagesDesc = makeDescriptor<float, 4>(
      device ? deviceImages.get() : batchData,
      {batch, m.channels, m.height, m.width});
  F32x1 weightsDesc = makeDescriptor<float, 1>(
      device ? deviceWeights.get() : weights.get(), {m.weightsSize});
  F32x2 logitsDesc = makeDescriptor<float, 2>(
      device ? deviceLogits.get() : batchLogits.get(), {batch, m.classes});
  I32x2 statsDesc = makeDescriptor<int32_t, 2>(
      device ? deviceStats.get() : batchStats.get(),
      {numLayers, m.numExperts() + 1});
  if (!device)
    updateStreamingStores();
  if (m.training) {
    // The compiled function has the losses argument (the manifest says so).
    F32x2 lossesDesc =
        makeDescriptor<float, 2>(batchLosses.get(), {numLayers, 3});
    // (Through void (*)(), the generic function pointer type.)
    auto trainingForward = reinterpret_cast<TrainingForwardFn>(
        reinterpret_cast<void (*)()>(&_mlir_ciface_vmoe_forward));
    trainingForward(&imagesDesc, &weightsDesc, ratio, validImages, &logitsDesc,
                    &statsDesc, &lossesDesc);
  } else {
    _mlir_ciface_vmoe_forward(&imagesDesc, &weightsDesc, ratio, validImages,
                              &logitsDesc, &statsDesc);
  }
  if (device &&
      (!deviceLogits.download(batchLogits.get(), batchLogits.length()) ||
       !deviceStats.download(batchStats.get(), batchStats.length())))
    return cudaError("GPU");
  return llvm::Error::success();
}

llvm::Error Model::forward(const float *images, int64_t count, double ratio,
                           float *logits, int32_t *stats) {
  if (count < 0)
    return llvm::createStringError("image count must be >= 0, got " +
                                   Twine(count));
  if (count > 0 && (!images || !logits))
    return llvm::createStringError("images and logits must not be null");
  if (llvm::Error error = checkCapacityRatio(ratio))
    return error;
  const Manifest &m = manifest;
  int64_t imageSize = m.imageSize();
  if (count > std::numeric_limits<int64_t>::max() / imageSize ||
      count > std::numeric_limits<int64_t>::max() / m.classes)
    return llvm::createStringError("too many images: " + Twine(count));

  int64_t statsSize = m.statsSize();
  llvm::SmallVector<int64_t> statsTotal(statsSize, 0);
  int64_t batch = m.batchImages;
  lossMeans.assign(m.lossesSize(), 0.0);
  int64_t batches = 0;
  auto accumulate = [&] {
    for (int64_t i = 0; i < statsSize; ++i)
      statsTotal[i] += batchStats.get()[i];
    for (int64_t i = 0; i < m.lossesSize(); ++i)
      lossMeans[i] += batchLosses.get()[i];
    ++batches;
  };
  if (m.expertParallel > 0) {
    // Batch s * R + r of the one-process run is rank r's; every rank runs
    // every step (the exchanges are collectives), with 0 valid images
    // when it has none left, and the logits of a step are gathered.
    Distribution &distribution = *getDistribution();
    int64_t ranks = distribution.size(), rank = distribution.rank();
    int64_t step = batch * ranks;
    std::vector<float> gathered(ranks * batch * m.classes);
    for (int64_t first = 0; first < count; first += step) {
      int64_t start = first + rank * batch;
      int64_t real = std::clamp<int64_t>(count - start, 0, batch);
      if (llvm::Error error =
              runBatch(images + std::min(start, count) * imageSize, real,
                       ratio))
        distribution.abort(llvm::toString(std::move(error)));
      accumulate();
      distribution.gatherAll(batchLogits.get(), batch * m.classes,
                             gathered.data());
      for (int64_t r = 0; r < ranks; ++r) {
        int64_t from = first + r * batch;
        int64_t n = std::clamp<int64_t>(count - from, 0, batch);
        std::memcpy(logits + from * m.classes,
                    gathered.data() + r * batch * m.classes,
                    sizeof(float) * n * m.classes);
      }
    }
    distribution.sumAll(statsTotal.data(), statsSize);
  } else {
    for (int64_t start = 0; start < count; start += batch) {
      int64_t real = std::min(batch, count - start);
      if (llvm::Error error = runBatch(images + start * imageSize, real, ratio))
        return error;
      std::memcpy(logits + start * m.classes, batchLogits.get(),
                  sizeof(float) * real * m.classes);
      accumulate();
    }
  }
  // Means over the groups of each batch -> over all groups (every batch
  // has as many groups).
  if (batches > 0)
    for (double &mean : lossMeans)
      mean /= static_cast<double>(batches);
  if (stats)
    for (int64_t i = 0; i < statsSize; ++i)
      stats[i] = static_cast<int32_t>(std::clamp<int64_t>(
          statsTotal[i], std::numeric_limits<int32_t>::min(),
          std::numeric_limits<int32_t>::max()));
  return llvm::Error::success();
}
