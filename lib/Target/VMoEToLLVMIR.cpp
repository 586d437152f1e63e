//===- VMoEToLLVMIR.cpp - vmoe module to LLVM IR ----------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The `--vmoe-to-llvmir` translation: the CPU pipeline followed by the
// upstream LLVM IR export, so that one command turns a vmoe layer into LLVM
// IR.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Target/Translations.h"

#include "vmoe/InitVMoE.h"
#include "vmoe/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"

using namespace mlir;

/// Lowers `op` (a module) for the host CPU and prints it as LLVM IR.
static LogicalResult lowerAndTranslate(Operation *op, raw_ostream &os) {
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    return op->emitError("vmoe-to-llvmir expects a builtin.module");
  PassManager pm(op->getContext());
  vmoe::buildVMoECPUPipeline(pm, vmoe::VMoECPUPipelineOptions());
  if (failed(pm.run(module)))
    return failure();
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext);
  if (!llvmModule)
    return module.emitError("translation to LLVM IR failed");
  llvmModule->print(os, nullptr);
  return success();
}

void mlir::vmoe::registerVMoEToLLVMIRTranslation() {
  TranslateFromMLIRRegistration registration(
      "vmoe-to-llvmir",
      "Lower vmoe IR with vmoe-lower-to-cpu and translate it to LLVM IR",
      lowerAndTranslate, [](DialectRegistry &registry) {
        registerAllDialects(registry);
        registerAllExtensions(registry);
        registerAllToLLVMIRTranslations(registry);
        registerVMoEDialects(registry);
      });
}
