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
// Before MlirOptMain runs, a bad command line or pass pipeline is reported
// in one line (vmoe/Support/OneLineErrors.h), and the input (file or
// standard input) is checked for nesting too deep for MLIR's recursive
// parser (vmoe/Support/BoundedMlirText.h).
//
//===----------------------------------------------------------------------===//

#include "vmoe/InitVMoE.h"
#include "vmoe/Support/BoundedMlirText.h"
#include "vmoe/Support/OneLineErrors.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/WithColor.h"

#include <optional>
#include <string>

/// Builds the pass pipeline of the command line once, in a scratch context,
/// before the input is read: a bad pipeline, an unknown pass option or a
/// value out of range is then one line and nothing is printed (MlirOptMain
/// reports it after parsing the input, over several lines). Returns that
/// line, or nothing when the pipeline builds.
static std::optional<std::string>
checkPassPipeline(mlir::DialectRegistry &registry) {
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  // Without the implicit module the input's top-level op anchors the
  // pipeline, which is unknown here.
  if (config.shouldUseExplicitModule())
    return std::nullopt;
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    diagnostics += diag.str() + "\n";
    return mlir::success();
  });
  mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName(),
                       mlir::OpPassManager::Nesting::Implicit);
  mlir::LogicalResult built = mlir::success();
  std::string printed =
      vmoe::captureStderr([&] { built = config.setupPassPipeline(pm); });
  if (mlir::succeeded(built))
    return std::nullopt;
  std::string line = vmoe::joinLines(printed + diagnostics, {"vmoe-opt: "});
  return line.empty() ? "the pass pipeline cannot be built" : line;
}

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates gpu.module bodies to LLVM IR.
  mlir::registerAllGPUToLLVMIRTranslations(registry);
  mlir::registerAllPasses();
  mlir::vmoe::registerVMoEDialects(registry);
  mlir::vmoe::registerVMoEPasses();
  // mlir::registerAndParseCLIOptions, parsing without exiting on an error.
  std::string helpHeader =
      mlir::registerCLIOptions("vmoe optimizer driver\n", registry);
  static llvm::cl::opt<std::string> inputFilename(
      llvm::cl::Positional, llvm::cl::desc("<input file>"),
      llvm::cl::init("-"));
  static llvm::cl::opt<std::string> outputFilename(
      "o", llvm::cl::desc("Output filename"),
      llvm::cl::value_desc("filename"), llvm::cl::init("-"));
  std::optional<std::string> error =
      vmoe::parseCommandLineOneLine(argc, argv, helpHeader);
  if (!error)
    error = checkPassPipeline(registry);
  if (error) {
    llvm::WithColor::error(llvm::errs(), "vmoe-opt") << *error << "\n";
    return 1;
  }
  if (!vmoe::checkMlirToolInput("vmoe-opt", inputFilename))
    return 1;
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, inputFilename, outputFilename, registry));
}
