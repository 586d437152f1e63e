//===- InitVMoE.cpp - Register everything vmoe provides ---------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "vmoe/InitVMoE.h"

#include "vmoe/Conversion/Passes.h"
#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Dialect/VMoE/Transforms/Passes.h"
#include "vmoe/Pipelines/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"

void mlir::vmoe::registerVMoEDialects(DialectRegistry &registry) {
  registry.insert<VMoEDialect>();
}

void mlir::vmoe::registerVMoEPasses() {
  registerVMoETransformsPasses();
  registerVMoEConversionPasses();
  registerVMoEPipelines();
}
