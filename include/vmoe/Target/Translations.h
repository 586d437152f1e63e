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

/// `--vmoe-to-ptx` and `--vmoe-to-cubin`: lower a vmoe module with
/// vmoe-lower-to-nvvm and print its kernels as PTX, or write them as one
/// cubin (`--vmoe-gpu-chip`, `--vmoe-cuda-path` choose the architecture and
/// toolkit). The pipeline parses upstream passes by name: the tool must
/// register them (registerAllPasses()).
void registerVMoEToGPUBinaryTranslations();

/// `--vmoe-to-c-header`: a C header declaring the `_mlir_ciface_` wrapper of
/// every function marked `llvm.emit_c_interface`, with the memref descriptor
/// structs it takes.
void registerVMoEToCHeaderTranslation();

} // namespace mlir::vmoe

#endif // VMOE_TARGET_TRANSLATIONS_H
