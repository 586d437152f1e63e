//===- ManifestFuzzer.cpp - libFuzzer target: compiled-model manifests ----===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// parseManifest() on arbitrary text: bounded JSON nesting, every field and
// derived size checked.
//
//===----------------------------------------------------------------------===//

#include "Formats/Manifest.h"

#include "llvm/ADT/StringRef.h"

using namespace vmoe::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<Manifest> manifest = parseManifest(text);
  if (!manifest)
    llvm::consumeError(manifest.takeError());
  return 0;
}
