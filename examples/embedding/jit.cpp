//===- jit.cpp - Embed the vmoe compiler and JIT-run a layer ----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe as a library in another program: parse a module with vmoe ops (the
// hand-routed layer of tiny_layer.mlir), lower it with the vmoe-lower-to-cpu
// pipeline (buildVMoECPUPipeline), JIT-compile it with MLIR's
// ExecutionEngine and call its C interface at two capacity ratios.
//
//===----------------------------------------------------------------------===//

#include "vmoe/InitVMoE.h"
#include "vmoe/Pipelines/Pipelines.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdio>

/// The C interface of @tiny_layer (pointers to memref descriptors).
using TinyLayerFn = void (*)(StridedMemRefType<float, 3> *x, double c,
                             StridedMemRefType<int32_t, 3> *ids,
                             StridedMemRefType<int32_t, 3> *slots,
                             StridedMemRefType<float, 3> *out);

/// Runs the layer at capacity ratio `c` and prints its results.
static void run(TinyLayerFn layer, double c) {
  float x[8] = {1, 0, 0, 1, 2, 0, 0, 0};
  int32_t ids[4], slots[4];
  float out[8];
  StridedMemRefType<float, 3> xDesc{x, x, 0, {1, 4, 2}, {8, 2, 1}};
  StridedMemRefType<int32_t, 3> idsDesc{ids, ids, 0, {1, 4, 1}, {4, 1, 1}};
  StridedMemRefType<int32_t, 3> slotsDesc{slots, slots, 0, {1, 4, 1},
                                          {4, 1, 1}};
  StridedMemRefType<float, 3> outDesc{out, out, 0, {1, 4, 2}, {8, 2, 1}};
  layer(&xDesc, c, &idsDesc, &slotsDesc, &outDesc);
  std::printf("C=%.1f ids:", c);
  for (int32_t id : ids)
    std::printf(" %d", id);
  std::printf("\nC=%.1f slots:", c);
  for (int32_t slot : slots)
    std::printf(" %d", slot);
  std::printf("\nC=%.1f out:", c);
  for (int t = 0; t < 4; ++t)
    std::printf("%s %g %g", t ? " |" : "", out[2 * t], out[2 * t + 1]);
  std::printf("\n");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: vmoe-jit <tiny_layer.mlir>\n";
    return 2;
  }
  // Every upstream dialect and extension (bufferization models, LLVM
  // conversion interfaces) plus vmoe, and the translations to LLVM IR.
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::vmoe::registerVMoEDialects(registry);
  mlir::MLIRContext context(registry);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(argv[1], &context);
  if (!module)
    return 1; // The parser printed the diagnostic.

  mlir::PassManager pm(&context);
  mlir::vmoe::buildVMoECPUPipeline(pm, mlir::vmoe::VMoECPUPipelineOptions());
  if (mlir::failed(pm.run(*module)))
    return 1;

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  // The options refer to the transformer: it must outlive create().
  auto optimize = mlir::makeOptimizingTransformer(
      /*optLevel=*/2, /*sizeLevel=*/0, /*targetMachine=*/nullptr);
  mlir::ExecutionEngineOptions options;
  options.transformer = optimize;
  auto engine = mlir::ExecutionEngine::create(*module, options);
  if (!engine) {
    llvm::errs() << "error: " << llvm::toString(engine.takeError()) << "\n";
    return 1;
  }
  llvm::Expected<void *> symbol = (*engine)->lookup("_mlir_ciface_tiny_layer");
  if (!symbol) {
    llvm::errs() << "error: " << llvm::toString(symbol.takeError()) << "\n";
    return 1;
  }
  auto layer = reinterpret_cast<TinyLayerFn>(*symbol);
  run(layer, 1.0);
  run(layer, 0.5);
  return 0;
}
