//===- FuzzMlir.h - Fuzz input parsed as vmoe IR ----------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The MLIR fuzz targets parse their input as the tools do: with the vmoe
// dialect and the dialects its tests use, after the nesting check of
// vmoe/Support/BoundedMlirText.h, diagnostics silenced.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_FUZZ_FUZZMLIR_H
#define VMOE_FUZZ_FUZZMLIR_H

#include "vmoe/Frontend/ModelBuilder.h"
#include "vmoe/Support/BoundedMlirText.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <cstdint>
#include <string>

namespace vmoe::fuzz {

/// One context for the whole run (creating one per input costs ~20 ms):
/// types and attributes accumulate, which -rss_limit_mb bounds.
inline mlir::MLIRContext &fuzzContext() {
  static mlir::MLIRContext &context = *[] {
    mlir::DialectRegistry registry;
    // The vmoe dialect and func, arith, tensor, linalg, ...
    mlir::vmoe::frontend::registerFrontendDialects(registry);
    auto *ctx = new mlir::MLIRContext(registry);
    ctx->disableMultithreading();
    ctx->loadAllAvailableDialects();
    return ctx;
  }();
  return context;
}

/// Parses `data` as a module, or returns null (text nested too deep for the
/// parser is refused first, as vmoe-opt refuses it).
inline mlir::OwningOpRef<mlir::ModuleOp> parseFuzzModule(const uint8_t *data,
                                                        size_t size) {
  // The MLIR lexer relies on a NUL after the text, as files read by the
  // tools have (llvm::MemoryBuffer): copy the input into a std::string.
  std::string text(reinterpret_cast<const char *>(data), size);
  if (llvm::Error error = ::vmoe::checkMlirNesting(text)) {
    llvm::consumeError(std::move(error));
    return nullptr;
  }
  return mlir::parseSourceString<mlir::ModuleOp>(text, &fuzzContext());
}

} // namespace vmoe::fuzz

#endif // VMOE_FUZZ_FUZZMLIR_H
