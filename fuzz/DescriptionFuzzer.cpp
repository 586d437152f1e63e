//===- DescriptionFuzzer.cpp - libFuzzer target: model descriptions -------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The description front end on arbitrary text: parse, check the build
// options (every size limit), build the module and verify it. A description
// that passes the checks must give valid IR: a verifier failure here is a
// front-end bug, reported as a crash.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Frontend/ModelBuilder.h"
#include "vmoe/Frontend/ModelDescription.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::vmoe::frontend;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<ModelDescription> model = parseModelDescription(text);
  if (!model) {
    llvm::consumeError(model.takeError());
    return 0;
  }
  BuildOptions options;
  if (llvm::Error e = validateBuildOptions(*model, options)) {
    llvm::consumeError(std::move(e));
    return 0;
  }
  // Building IR for the largest models within the limits is slow (linear in
  // the weights and in the depth: ~10 s for 1024 blocks under ASan); the
  // parse and the checks above are the target. Small models are built.
  if (weightsSize(weightLayout(*model)) > (int64_t(1) << 24) ||
      model->depth > 32)
    return 0;
  static DialectRegistry registry = [] {
    DialectRegistry r;
    registerFrontendDialects(r);
    return r;
  }();
  MLIRContext context(registry);
  context.disableMultithreading();
  OwningOpRef<ModuleOp> module = buildModelModule(context, *model, options);
  if (!module || failed(verify(*module)))
    std::abort(); // The front end built invalid IR.
  return 0;
}
