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

#include "FuzzMlir.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ScopedDiagnosticHandler quiet(&::vmoe::fuzz::fuzzContext(),
                                [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module = ::vmoe::fuzz::parseFuzzModule(data, size);
  if (module)
    (void)verify(*module);
  return 0;
}
