//===- vmoe-opt.cpp - vmoe optimizer driver ---------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// mlir-opt with the vmoe dialect, passes and pipelines, plus every upstream
// dialect, extension and pass, so that a whole lowering (vmoe -> linalg ->
// LLVM, or -> gpu -> NVVM) runs in one tool. The out-of-line registerAll*()
// functions keep this file cheap to compile. The input (file or standard
// input) is first checked for nesting too deep for MLIR's recursive parser
// (vmoe/Support/BoundedMlirText.h).
//
//===----------------------------------------------------------------------===//

#include "vmoe/InitVMoE.h"
#include "vmoe/Support/BoundedMlirText.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates gpu.module bodies to LLVM IR.
  mlir::registerAllGPUToLLVMIRTranslations(registry);
  mlir::registerAllPasses();
  mlir::vmoe::registerVMoEDialects(registry);
  mlir::vmoe::registerVMoEPasses();
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "vmoe optimizer driver\n", registry);
  if (!vmoe::checkMlirToolInput("vmoe-opt", inputFilename))
    return 1;
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, inputFilename, outputFilename, registry));
}
