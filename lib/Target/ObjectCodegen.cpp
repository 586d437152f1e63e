//===- ObjectCodegen.cpp - LLVM IR to native code ---------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Target/ObjectCodegen.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The native target and what it knows of subtargets.
static llvm::Expected<std::unique_ptr<llvm::MCSubtargetInfo>>
nativeSubtargetInfo(llvm::Triple &triple) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  triple = llvm::Triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return makeError("no target for " + triple.str() + ": " + error);
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      target->createMCSubtargetInfo(triple, "", ""));
  if (!info)
    return makeError("no subtarget information for " + triple.str());
  return info;
}

llvm::Error mlir::vmoe::checkCPU(llvm::StringRef cpu) {
  llvm::Triple triple;
  auto info = nativeSubtargetInfo(triple);
  if (!info)
    return info.takeError();
  if (cpu == "native" || (*info)->isCPUStringValid(cpu))
    return llvm::Error::success();
  return makeError("unknown CPU '" + cpu + "' for " + triple.str() +
                   " (llc -mcpu=help lists them)");
}

llvm::Error mlir::vmoe::checkFeatures(llvm::StringRef features) {
  llvm::Triple triple;
  auto info = nativeSubtargetInfo(triple);
  if (!info)
    return info.takeError();
  for (llvm::StringRef feature : llvm::split(features, ',')) {
    llvm::StringRef name = feature.trim();
    if (name.empty())
      continue;
    if (!name.consume_front("+"))
      name.consume_front("-");
    if (!llvm::any_of((*info)->getAllProcessorFeatures(),
                      [&](const llvm::SubtargetFeatureKV &known) {
                        return name == known.Key;
                      }))
      return makeError("unknown feature '" + feature.trim() + "' for " +
                       triple.str() + " (llc -mattr=help lists them)");
  }
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
mlir::vmoe::createTargetMachine(const CodegenOptions &options) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return makeError("no target for " + triple.str() + ": " + error);
  if (llvm::Error problem = checkCPU(options.cpu))
    return std::move(problem);
  if (llvm::Error problem = checkFeatures(options.features))
    return std::move(problem);
  std::string cpu = options.cpu;
  llvm::SubtargetFeatures features;
  if (cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      features.AddFeature(feature.first(), feature.second);
  }
  if (!options.features.empty())
    for (llvm::StringRef feature : llvm::split(options.features, ','))
      if (!feature.empty())
        features.AddFeature(feature);
  llvm::CodeGenOptLevel level =
      options.optLevel == 0   ? llvm::CodeGenOptLevel::None
      : options.optLevel == 1 ? llvm::CodeGenOptLevel::Less
      : options.optLevel == 2 ? llvm::CodeGenOptLevel::Default
                              : llvm::CodeGenOptLevel::Aggressive;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features.getString(), llvm::TargetOptions(),
      llvm::Reloc::PIC_, std::nullopt, level));
  if (!machine)
    return makeError("cannot create a target machine for cpu '" + cpu + "'");
  return machine;
}

llvm::Expected<std::unique_ptr<llvm::Module>>
mlir::vmoe::translateAndOptimize(ModuleOp module, llvm::LLVMContext &context,
                                 llvm::TargetMachine &machine,
                                 unsigned optLevel) {
  DialectRegistry registry;
  registerAllToLLVMIRTranslations(registry);
  module.getContext()->appendDialectRegistry(registry);
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, context);
  if (!llvmModule)
    return makeError("translation to LLVM IR failed");
  llvmModule->setTargetTriple(machine.getTargetTriple());
  llvmModule->setDataLayout(machine.createDataLayout());
  auto optimize = makeOptimizingTransformer(optLevel, /*sizeLevel=*/0,
                                            &machine);
  if (llvm::Error error = optimize(llvmModule.get()))
    return std::move(error);
  return llvmModule;
}

llvm::Error mlir::vmoe::emitMachineCode(llvm::Module &module,
                                        llvm::TargetMachine &machine,
                                        llvm::raw_pwrite_stream &os,
                                        bool assembly) {
  llvm::legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, os, nullptr,
                                  assembly ? llvm::CodeGenFileType::AssemblyFile
                                           : llvm::CodeGenFileType::ObjectFile))
    return makeError("the target cannot emit this file type");
  pm.run(module);
  return llvm::Error::success();
}
