//===- vmoe-translate.cpp - vmoe translation driver -------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// mlir-translate with the upstream translations plus the vmoe ones:
// `--vmoe-to-llvmir` (CPU), `--vmoe-to-ptx` and `--vmoe-to-cubin` (the GPU
// kernels), `--vmoe-to-c-header` (the C entry points).
//
//===----------------------------------------------------------------------===//

#include "vmoe/InitVMoE.h"
#include "vmoe/Target/Translations.h"

#include "mlir/InitAllPasses.h"
#include "mlir/InitAllTranslations.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  mlir::registerAllTranslations();
  // The GPU pipeline parses upstream passes by name.
  mlir::registerAllPasses();
  mlir::vmoe::registerVMoEPasses();
  mlir::vmoe::registerVMoEToLLVMIRTranslation();
  mlir::vmoe::registerVMoEToGPUBinaryTranslations();
  mlir::vmoe::registerVMoEToCHeaderTranslation();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "vmoe translation driver\n"));
}
