//===- PassesFuzzer.cpp - libFuzzer target: vmoe passes on verified IR ----===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Parses arbitrary text as MLIR; IR the verifiers accept goes through the
// vmoe passes of the CPU pipeline (sizing, fusion, lowering to SCF and the
// vector microkernels). A pass may refuse IR with a diagnostic; a crash, or
// a pass that succeeds and leaves invalid IR, is a bug (usually a missing
// verifier rule) and aborts.
//
//===----------------------------------------------------------------------===//

#include "FuzzMlir.h"

#include "vmoe/InitVMoE.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

static constexpr const char *kPipeline =
    "func.func(vmoe-buffer-sizing,vmoe-fuse-routing,vmoe-fuse-experts,"
    "convert-vmoe-to-scf),vmoe-vectorize-contractions,"
    "func.func(vmoe-vectorize-transposes)";

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool registered = [] {
    mlir::vmoe::registerVMoEPasses();
    return true;
  }();
  (void)registered;
  MLIRContext &context = ::vmoe::fuzz::fuzzContext();
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module = ::vmoe::fuzz::parseFuzzModule(data, size);
  if (!module || failed(verify(*module)))
    return 0;
  PassManager pm(&context);
  // Verified once at the end, so that invalid IR is told from a refusal.
  pm.enableVerifier(false);
  if (failed(parsePassPipeline(kPipeline, pm))) {
    llvm::errs() << "passes fuzzer: the pipeline does not parse: " << kPipeline
                 << "\n";
    std::abort(); // The pipeline text itself is wrong.
  }
  if (succeeded(pm.run(*module)) && failed(verify(*module)))
    std::abort(); // A vmoe pass left invalid IR.
  return 0;
}
