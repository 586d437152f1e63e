//===- Translations.h - vmoe translations -----------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Translations that vmoe-translate offers next to the upstream ones.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_TARGET_TRANSLATIONS_H
#define VMOE_TARGET_TRANSLATIONS_H

namespace mlir::vmoe {

/// `--vmoe-to-llvmir`: lowers a vmoe module with vmoe-lower-to-cpu and
/// prints the LLVM IR module.
void registerVMoEToLLVMIRTranslation();

} // namespace mlir::vmoe

#endif // VMOE_TARGET_TRANSLATIONS_H
