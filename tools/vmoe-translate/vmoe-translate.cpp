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
// The command line is first parsed as mlirTranslateMain will parse it, so
// that a bad one is one line (vmoe/Support/OneLineErrors.h; mlirTranslateMain
// prints a missing translation once per registered translation), and the
// input is checked for nesting too deep for MLIR's recursive parser
// (vmoe/Support/BoundedMlirText.h), as in vmoe-opt.
//
//===----------------------------------------------------------------------===//

#include "vmoe/InitVMoE.h"
#include "vmoe/Support/BoundedMlirText.h"
#include "vmoe/Support/OneLineErrors.h"
#include "vmoe/Target/Translations.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllPasses.h"
#include "mlir/InitAllTranslations.h"
#include "mlir/Support/Timing.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/WithColor.h"

#include <memory>
#include <optional>
#include <string>

namespace cl = llvm::cl;

namespace {
/// The values of mlirTranslateMain's --verify-diagnostics.
enum class VerifyLevel { All, OnlyExpected };
} // namespace

/// The options of the GPU translations (lib/Target/VMoEToGPUBinary.cpp)
/// are unused by the others: an error when given without --vmoe-to-ptx or
/// --vmoe-to-cubin.
static std::optional<std::string> checkGPUOptionsUsed(int argc, char **argv) {
  for (llvm::StringRef arg : llvm::ArrayRef<char *>(argv + 1, argc - 1)) {
    arg = arg.drop_while([](char c) { return c == '-'; });
    if (arg == "vmoe-to-ptx" || arg == "vmoe-to-cubin")
      return std::nullopt;
  }
  auto &options = cl::getRegisteredOptions();
  for (llvm::StringRef name :
       {"vmoe-gpu-chip", "vmoe-cuda-path", "vmoe-gpu-mma"}) {
    auto it = options.find(name);
    if (it != options.end() && it->second->getNumOccurrences())
      return ("--" + name + ": only used with --vmoe-to-ptx and "
                            "--vmoe-to-cubin")
          .str();
  }
  return std::nullopt;
}

/// Parses the command line with the options mlirTranslateMain (MLIR 22)
/// registers, which exist only inside it; on success sets `input` to the
/// input file and leaves the options as they were, for mlirTranslateMain to
/// parse the same line again. Returns the error as one line.
static std::optional<std::string> parseCommandLine(int argc, char **argv,
                                                   std::string &input) {
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerTranslationCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  cl::opt<std::string> inputFilename(cl::Positional, cl::desc("<input file>"),
                                     cl::init("-"));
  cl::opt<std::string> outputFilename("o", cl::desc("Output filename"),
                                      cl::value_desc("filename"),
                                      cl::init("-"));
  cl::opt<bool> allowUnregistered(
      "allow-unregistered-dialect",
      cl::desc("Allow operation with no registered dialects"));
  cl::opt<std::string> inputSplitMarker(
      "split-input-file", cl::ValueOptional,
      cl::desc("Split the input file into chunks using the given or default "
               "marker and process each chunk independently"));
  cl::opt<VerifyLevel> verifyDiagnostics(
      "verify-diagnostics", cl::ValueOptional,
      cl::desc("Check that emitted diagnostics match expected-* lines"),
      cl::values(clEnumValN(VerifyLevel::All, "all", "all diagnostics"),
                 clEnumValN(VerifyLevel::All, "", "all diagnostics"),
                 clEnumValN(VerifyLevel::OnlyExpected, "only-expected",
                            "expected diagnostics only")));
  cl::opt<bool> errorDiagnosticsOnly(
      "error-diagnostics-only", cl::desc("Filter all non-error diagnostics"));
  cl::opt<std::string> outputSplitMarker(
      "output-split-marker", cl::desc("Split marker to use for merging the "
                                      "output"));
  cl::list<const mlir::Translation *, bool, mlir::TranslationParser>
      translations("", cl::desc("Translations to perform"), cl::Required);
  std::optional<std::string> error = vmoe::parseCommandLineOneLine(
      argc, argv, "vmoe translation driver\n");
  if (!error)
    error = checkGPUOptionsUsed(argc, argv);
  input = inputFilename;
  for (cl::Option *option : std::initializer_list<cl::Option *>{
           &inputFilename, &outputFilename, &allowUnregistered,
           &inputSplitMarker, &verifyDiagnostics, &errorDiagnosticsOnly,
           &outputSplitMarker, std::addressof(translations)})
    option->removeArgument();
  cl::ResetAllOptionOccurrences();
  return error;
}

int main(int argc, char **argv) {
  mlir::registerAllTranslations();
  // The GPU pipeline parses upstream passes by name.
  mlir::registerAllPasses();
  mlir::vmoe::registerVMoEPasses();
  mlir::vmoe::registerVMoEToLLVMIRTranslation();
  mlir::vmoe::registerVMoEToGPUBinaryTranslations();
  mlir::vmoe::registerVMoEToCHeaderTranslation();
  std::string input;
  if (std::optional<std::string> error = parseCommandLine(argc, argv, input)) {
    llvm::WithColor::error(llvm::errs(), "vmoe-translate") << *error << "\n";
    return 1;
  }
  if (!vmoe::checkMlirToolInput("vmoe-translate", input))
    return 1;
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "vmoe translation driver\n"));
}
