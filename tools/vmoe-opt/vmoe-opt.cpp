//===- vmoe-opt.cpp - vmoe optimizer driver ---------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// mlir-opt with the vmoe dialect, passes and pipelines, plus every upstream
// dialect, extension and pass, so that a whole lowering (vmoe -> linalg ->
// LLVM, or -> gpu -> NVVM) runs in one tool. The out-of-line registerAll*()
// functions keep this file cheap to compile.
//
//===----------------------------------------------------------------------===//

#include "vmoe/InitVMoE.h"

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
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "vmoe optimizer driver\n", registry));
}
