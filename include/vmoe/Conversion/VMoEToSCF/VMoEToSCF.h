//===- VMoEToSCF.h - vmoe to linalg/scf lowering ----------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_CONVERSION_VMOETOSCF_VMOETOSCF_H
#define VMOE_CONVERSION_VMOETOSCF_VMOETOSCF_H

#include <cstdint>

#include "vmoe/Codegen/Microkernel.h"

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::vmoe {

/// Adds the patterns that lower every vmoe op to tensor-level linalg, scf,
/// tensor, arith and math IR (vmoe.fused_experts to memref-level
/// microkernel loops with register tiles of `shape`).
void populateVMoEToSCFConversionPatterns(RewritePatternSet &patterns,
                                         const MicrokernelShape &shape = {});

} // namespace mlir::vmoe

#endif // VMOE_CONVERSION_VMOETOSCF_VMOETOSCF_H
