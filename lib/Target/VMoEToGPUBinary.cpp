//===- VMoEToGPUBinary.cpp - vmoe module to PTX or a cubin ------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The `--vmoe-to-ptx` and `--vmoe-to-cubin` translations: the GPU pipeline
// (vmoe-lower-to-nvvm, buildVMoENVVMPipeline) with the kernel format set to
// PTX or cubin, after which the kernels of the `gpu.binary` op it leaves are
// printed as they are. The host side, which vmoe-compile links with the
// mgpu runtime, is not part of the output.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Target/Translations.h"

#include "vmoe/Codegen/GPUGemm.h"
#include "vmoe/InitVMoE.h"
#include "vmoe/Pipelines/Pipelines.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"

using namespace mlir;

namespace {
/// The `format` option of vmoe-lower-to-nvvm for each translation.
enum class KernelFormat { PTX, Cubin };
} // namespace

/// Command-line options shared by both translations; created when they are
/// registered, so that only tools offering the translations list them.
struct GPUTranslationOptions {
  llvm::cl::opt<std::string> chip{
      "vmoe-gpu-chip",
      llvm::cl::desc("GPU architecture of --vmoe-to-ptx/--vmoe-to-cubin"),
      llvm::cl::init("sm_90")};
  llvm::cl::opt<std::string> cudaPath{
      "vmoe-cuda-path",
      llvm::cl::desc("CUDA toolkit (libdevice, ptxas) of --vmoe-to-ptx/"
                     "--vmoe-to-cubin"),
      llvm::cl::init("/usr/local/cuda")};
  llvm::cl::opt<std::string> mma{
      "vmoe-gpu-mma",
      llvm::cl::desc("GEMMs of --vmoe-to-ptx/--vmoe-to-cubin: none "
                     "(FP32 SIMT), tf32 or bf16 (mma.sync)"),
      llvm::cl::init("none")};
};

static GPUTranslationOptions &getOptions() {
  static GPUTranslationOptions options;
  return options;
}

/// Lowers `op` (a module) with vmoe-lower-to-nvvm and prints the kernels of
/// its `gpu.binary` ops in `format`.
static LogicalResult lowerToKernels(Operation *op, raw_ostream &os,
                                    KernelFormat format) {
  StringRef name =
      format == KernelFormat::PTX ? "vmoe-to-ptx" : "vmoe-to-cubin";
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    return op->emitError() << name << " expects a builtin.module";
  vmoe::VMoENVVMPipelineOptions options;
  options.chip = getOptions().chip;
  options.toolkit = getOptions().cudaPath;
  options.gpuMma = getOptions().mma;
  // The translation's options, named as on the command line.
  llvm::Error bad = vmoe::checkGPUChip("--vmoe-gpu-chip", options.chip);
  if (!bad)
    bad = vmoe::checkCUDAToolkitPath("--vmoe-cuda-path", options.toolkit);
  if (!bad)
    bad = vmoe::checkGPUMmaOption("--vmoe-gpu-mma", options.gpuMma);
  if (bad)
    return emitError(module.getLoc())
           << name << ": " << llvm::toString(std::move(bad));
  options.format = format == KernelFormat::PTX ? "isa" : "bin";
  // One PTX module or cubin for all kernels.
  options.mergeKernelModules = true;
  PassManager pm(op->getContext());
  if (failed(vmoe::buildVMoENVVMPipeline(pm, options)))
    return emitError(module.getLoc()) << name
                                      << ": the NVVM pipeline could not be "
                                         "built";
  if (failed(pm.run(module)))
    return failure();

  SmallVector<gpu::BinaryOp> binaries(module.getOps<gpu::BinaryOp>());
  if (binaries.empty())
    return emitError(module.getLoc())
           << name
           << ": the module has no GPU kernels after vmoe-lower-to-nvvm";
  // The kernel modules were merged into one; one object per target, and the
  // pipeline attaches one NVVM target.
  if (binaries.size() != 1)
    return emitError(module.getLoc())
           << name << ": expected one gpu.binary, got " << binaries.size();
  auto object = cast<gpu::ObjectAttr>(binaries.front().getObjects()[0]);
  os << object.getObject().getValue();
  return success();
}

/// The dialects a vmoe module may use, with the GPU translations the pipeline
/// needs to serialize kernels.
static void registerGPUTranslationDialects(DialectRegistry &registry) {
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllGPUToLLVMIRTranslations(registry);
  vmoe::registerVMoEDialects(registry);
}

void mlir::vmoe::registerVMoEToGPUBinaryTranslations() {
  getOptions();
  TranslateFromMLIRRegistration ptx(
      "vmoe-to-ptx",
      "Lower vmoe IR with vmoe-lower-to-nvvm and print the kernels as PTX",
      [](Operation *op, raw_ostream &os) {
        return lowerToKernels(op, os, KernelFormat::PTX);
      },
      registerGPUTranslationDialects);
  TranslateFromMLIRRegistration cubin(
      "vmoe-to-cubin",
      "Lower vmoe IR with vmoe-lower-to-nvvm and write the kernels as a cubin "
      "(ptxas)",
      [](Operation *op, raw_ostream &os) {
        return lowerToKernels(op, os, KernelFormat::Cubin);
      },
      registerGPUTranslationDialects);
}
