//===- vmoe-translate.cpp - vmoe translation driver -------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// mlir-translate with the upstream translations plus the vmoe ones:
// `--vmoe-to-llvmir` (CPU), `--vmoe-to-ptx` and `--vmoe-to-cubin` (the GPU
// kernels), `--vmoe-to-c-header` (the C entry points). The input is first
// checked for nesting too deep for MLIR's recursive parser (vmoe/Support/
// BoundedMlirText.h), as in vmoe-opt.
//
//===----------------------------------------------------------------------===//

#include "vmoe/InitVMoE.h"
#include "vmoe/Support/BoundedMlirText.h"
#include "vmoe/Target/Translations.h"

#include "mlir/InitAllPasses.h"
#include "mlir/InitAllTranslations.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

#include "llvm/ADT/StringRef.h"

#include <optional>

/// The input file mlirTranslateMain will read ("-": standard input), or
/// nothing when it reads none (--help, --version). Its options take their
/// values as `-opt=value`, except `-o FILE`.
static std::optional<llvm::StringRef> findInputFilename(int argc,
                                                        char **argv) {
  llvm::StringRef input = "-";
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "-o" || arg == "--o")
      ++i;
    else if (arg.starts_with("-help") || arg.starts_with("--help") ||
             arg == "--version" || arg == "-version")
      return std::nullopt;
    else if (arg == "-" || !arg.starts_with("-"))
      input = arg;
  }
  return input;
}

int main(int argc, char **argv) {
  if (std::optional<llvm::StringRef> input = findInputFilename(argc, argv))
    if (!vmoe::checkMlirToolInput("vmoe-translate", *input))
      return 1;
  mlir::registerAllTranslations();
  // The GPU pipeline parses upstream passes by name.
  mlir::registerAllPasses();
  mlir::vmoe::registerVMoEPasses();
  mlir::vmoe::registerVMoEToLLVMIRTranslation();
  mlir::vmoe::registerVMoEToGPUBinaryTranslations();
  mlir::vmoe::registerVMoEToCHeaderTranslation();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "vmoe translation driver\n"));
}
