//===- MlirFuzzer.cpp - libFuzzer target: vmoe IR parse + verify ----------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Parses arbitrary text as MLIR with the vmoe dialect and the dialects the
// vmoe tests use, then verifies it: the vmoe verifiers must reject bad IR
// with a diagnostic, never crash on it.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Frontend/ModelBuilder.h"
#include "vmoe/Support/BoundedMlirText.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <string>

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // One context for the whole run (creating one per input costs ~20 ms):
  // types and attributes accumulate, which -rss_limit_mb bounds.
  static MLIRContext &context = *[] {
    DialectRegistry registry;
    // The vmoe dialect and func, arith, tensor, linalg, ...
    mlir::vmoe::frontend::registerFrontendDialects(registry);
    auto *ctx = new MLIRContext(registry);
    ctx->disableMultithreading();
    ctx->loadAllAvailableDialects();
    return ctx;
  }();
  ScopedDiagnosticHandler quiet(&context, [](Diagnostic &) { return success(); });
  // The MLIR lexer relies on a NUL after the text, as files read by the
  // tools have (llvm::MemoryBuffer): copy the input into a std::string.
  std::string text(reinterpret_cast<const char *>(data), size);
  // As vmoe-opt does: text nested too deep for the parser is refused.
  if (llvm::Error error = ::vmoe::checkMlirNesting(text)) {
    llvm::consumeError(std::move(error));
    return 0;
  }
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (module)
    (void)verify(*module);
  return 0;
}
