//===- VMoEPlugin.cpp - vmoe as an mlir-opt dialect plugin ------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Lets the upstream `mlir-opt` load vmoe without our tools:
//   mlir-opt --load-dialect-plugin=VMoEPlugin.so --load-pass-plugin=... in.mlir
// The library exports both plugin entry points: the dialect (with its
// external models) and the vmoe passes and pipelines.
//
//===----------------------------------------------------------------------===//

#include "vmoe/InitVMoE.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Compiler.h"

/// Entry point of `--load-dialect-plugin`.
extern "C" LLVM_ATTRIBUTE_WEAK ::mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "VMoE", LLVM_VERSION_STRING,
          [](::mlir::DialectRegistry *registry) {
            ::mlir::vmoe::registerVMoEDialects(*registry);
          }};
}

/// Entry point of `--load-pass-plugin`.
extern "C" LLVM_ATTRIBUTE_WEAK ::mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "VMoEPasses", LLVM_VERSION_STRING,
          [] { ::mlir::vmoe::registerVMoEPasses(); }};
}
