//===- ObjectCodegen.h - LLVM IR to native code -----------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The last step of the CPU path: an LLVM-dialect module becomes optimized
// LLVM IR and an object file for the host (or a named) CPU.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_TARGET_OBJECTCODEGEN_H
#define VMOE_TARGET_OBJECTCODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
class raw_pwrite_stream;
} // namespace llvm

namespace mlir::vmoe {

/// Target and optimization choices of native code generation.
struct CodegenOptions {
  unsigned optLevel = 2;       ///< LLVM -O level, 0..3.
  std::string cpu = "native";  ///< "native": the host CPU and its features.
  std::string features;        ///< Extra `+feature,-feature` list.
};

/// Checks a CPU name ("native" or one the host's target knows); LLVM itself
/// would warn and ignore an unknown one.
llvm::Error checkCPU(llvm::StringRef cpu);

/// Checks a `+feature,-feature` list against the host target's features.
llvm::Error checkFeatures(llvm::StringRef features);

/// A target machine for `options` (position-independent code, so that the
/// same object serves executables and shared libraries). A CPU or feature
/// the target does not know is an error (LLVM itself warns and ignores it).
llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
createTargetMachine(const CodegenOptions &options);

/// Translates an LLVM-dialect module to LLVM IR for `machine` and runs the
/// LLVM optimization pipeline of `optLevel` on it.
llvm::Expected<std::unique_ptr<llvm::Module>>
translateAndOptimize(ModuleOp module, llvm::LLVMContext &context,
                     llvm::TargetMachine &machine, unsigned optLevel);

/// Writes `module` as an object file (or assembly) to `os`.
llvm::Error emitMachineCode(llvm::Module &module, llvm::TargetMachine &machine,
                            llvm::raw_pwrite_stream &os, bool assembly);

} // namespace mlir::vmoe

#endif // VMOE_TARGET_OBJECTCODEGEN_H
