//===- PipelineOptions.cpp - Checked pipeline options -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The checks of the options of vmoe-lower-to-cpu and vmoe-lower-to-nvvm,
// and their registration: options parsed from a pipeline's text are
// checked there, so that a bad value is one line before anything runs
// (docs/Limits.md, "Options").
//
//===----------------------------------------------------------------------===//

#include "vmoe/Pipelines/Pipelines.h"

#include "vmoe/Codegen/GPUGemm.h"
#include "vmoe/Codegen/Microkernel.h"
#include "vmoe/Support/Limits.h"
#include "vmoe/Support/OptionChecks.h"
#include "vmoe/Support/PassOptionChecks.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

llvm::Error
mlir::vmoe::checkVMoECPUPipelineOptions(const VMoECPUPipelineOptions &options) {
  if (llvm::Error e =
          ::vmoe::checkRatioOrZero("capacity-ratio", options.capacityRatio))
    return e;
  if (llvm::Error e = checkMicrokernelOptions(
          options.vectorWidth, options.tileRows, options.tileVectors,
          /*zeroMeansDefault=*/true))
    return e;
  // 0: one process; else a count of ranks, a size of the IR (vmoe-C2).
  return ::vmoe::checkRange("expert-parallel", options.expertParallel, 0,
                            ::vmoe::limits::kMaxDimension);
}

llvm::Error mlir::vmoe::checkGPUChip(llvm::StringRef option,
                                     llvm::StringRef chip) {
  llvm::StringRef rest = chip;
  bool valid = rest.consume_front("sm_") && !rest.empty() &&
               llvm::isDigit(rest.front());
  rest = rest.drop_while(llvm::isDigit);
  valid = valid &&
          (rest.empty() || (rest.size() == 1 && llvm::isLower(rest[0])));
  if (valid)
    return llvm::Error::success();
  return ::vmoe::optionError(option, "must be a CUDA architecture such as "
                                     "sm_80 or sm_90a, got '" +
                                         chip + "'");
}

llvm::Error mlir::vmoe::checkCUDAToolkitPath(llvm::StringRef option,
                                             llvm::StringRef path) {
  if (path.empty())
    return ::vmoe::optionError(option, "must name the CUDA toolkit folder");
  size_t bad = path.find_first_of(" \t\n,{}\"'");
  if (bad == llvm::StringRef::npos)
    return llvm::Error::success();
  return ::vmoe::optionError(option, "cannot contain spaces, commas, braces "
                                     "or quotes, got '" +
                                         path + "'");
}

llvm::Error mlir::vmoe::checkVMoENVVMPipelineOptions(
    const VMoENVVMPipelineOptions &options) {
  if (llvm::Error e =
          ::vmoe::checkRatioOrZero("capacity-ratio", options.capacityRatio))
    return e;
  if (llvm::Error e = checkGPUChip("chip", options.chip))
    return e;
  if (llvm::Error e = checkCUDAToolkitPath("toolkit", options.toolkit))
    return e;
  if (llvm::Error e = ::vmoe::checkChoice(
          "format", options.format, {"bin", "isa", "fatbin", "emulator"}))
    return e;
  if (llvm::Error e = ::vmoe::checkRange(
          "threads-per-block", options.threadsPerBlock, 1, 1024))
    return e;
  return checkGPUMmaOption("gpu-mma", options.gpuMma);
}

/// Registers pipeline `name`: its options are parsed (llvm::cl's messages
/// in one line) and checked by `check` before `build` adds its passes.
template <typename Options>
static void registerCheckedPipeline(
    llvm::StringRef name, llvm::StringRef description,
    llvm::Error (*check)(const Options &),
    std::function<LogicalResult(OpPassManager &, const Options &)> build) {
  std::string where = name.str();
  registerPassPipeline(
      name, description,
      [=](OpPassManager &pm, llvm::StringRef text,
          mlir::vmoe::OptionErrorHandler errorHandler) -> LogicalResult {
        Options options;
        if (failed(mlir::vmoe::parseOptionsInOneLine(
                where,
                [&](mlir::vmoe::OptionErrorHandler handler) -> LogicalResult {
                  std::string messages;
                  llvm::raw_string_ostream stream(messages);
                  if (succeeded(options.parseFromString(text, stream)))
                    return success();
                  return handler(messages);
                },
                errorHandler)))
          return failure();
        if (llvm::Error error = check(options))
          return errorHandler(where + ": " + llvm::toString(std::move(error)));
        return build(pm, options);
      },
      [](function_ref<void(const detail::PassOptions &)> optHandler) {
        optHandler(Options());
      });
}

void mlir::vmoe::registerVMoEPipelines() {
  registerCheckedPipeline<VMoECPUPipelineOptions>(
      "vmoe-lower-to-cpu",
      "Lower vmoe (tensors) to the LLVM dialect for the host CPU",
      checkVMoECPUPipelineOptions,
      [](OpPassManager &pm, const VMoECPUPipelineOptions &options) {
        buildVMoECPUPipeline(pm, options);
        return success();
      });
  registerCheckedPipeline<VMoENVVMPipelineOptions>(
      "vmoe-lower-to-nvvm",
      "Lower vmoe (tensors) to host LLVM code launching NVVM kernels (cubin)",
      checkVMoENVVMPipelineOptions, buildVMoENVVMPipeline);
}
