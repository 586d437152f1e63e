//===- InitVMoE.h - Register everything vmoe provides -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// One place for tools and plugins to register the vmoe dialect, its external
// interface models, passes and pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_INITVMOE_H
#define VMOE_INITVMOE_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::vmoe {

/// Registers the vmoe dialect and the external models vmoe attaches to other
/// dialects.
void registerVMoEDialects(DialectRegistry &registry);

/// Registers every vmoe pass and pipeline with the global pass registry.
void registerVMoEPasses();

} // namespace mlir::vmoe

#endif // VMOE_INITVMOE_H
