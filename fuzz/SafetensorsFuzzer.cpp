//===- SafetensorsFuzzer.cpp - libFuzzer target: safetensors --------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// loadSafetensors() on arbitrary bytes, for the model of
// test/Runtime/Inputs/fake_model.c (head.kernel [4, 2], head.bias [2]). Any
// input must give success or an error, never a crash, a sanitizer report or
// a write outside the weights buffer.
//
//===----------------------------------------------------------------------===//

#include "FuzzFile.h"

#include "Formats/Manifest.h"
#include "Formats/Safetensors.h"

#include <cstdlib>
#include <vector>

using namespace vmoe::runtime;

static const char kManifest[] =
    R"({"format": "vmoe-compiled-model", "version": 1, "name": "fuzz",
        "batch_images": 2, "image": {"channels": 1, "height": 2, "width": 2},
        "classes": 2, "capacity_ratio": 1.0, "max_capacity_ratio": 2.0,
        "moe_layers": [], "weights_size": 32,
        "tensors": [{"name": "head.kernel", "shape": [4, 2], "offset": 0},
                    {"name": "head.bias", "shape": [2], "offset": 16}]})";

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Manifest manifest = [] {
    llvm::Expected<Manifest> parsed = parseManifest(kManifest);
    if (!parsed)
      std::abort();
    return std::move(*parsed);
  }();
  const std::string &path =
      vmoe::fuzz::writeFuzzFile(data, size, ".safetensors");
  std::vector<float> weights(manifest.weightsSize);
  llvm::consumeError(loadSafetensors(path, manifest, weights.data()));
  return 0;
}
