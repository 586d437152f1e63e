//===- vmoe-translate.cpp - vmoe translation driver -------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// mlir-translate with the upstream translations plus the vmoe ones
// (`--vmoe-to-llvmir`).
//
//===----------------------------------------------------------------------===//

#include "vmoe/InitVMoE.h"
#include "vmoe/Target/Translations.h"

#include "mlir/InitAllTranslations.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  mlir::registerAllTranslations();
  mlir::vmoe::registerVMoEPasses();
  mlir::vmoe::registerVMoEToLLVMIRTranslation();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "vmoe translation driver\n"));
}
