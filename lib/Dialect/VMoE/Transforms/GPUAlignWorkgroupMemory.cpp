//===- GPUAlignWorkgroupMemory.cpp - Align shared buffers -------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Workgroup attributions of gpu.func kernels get an llvm.align attribute,
// so that their .shared variables allow 16-byte accesses.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEGPUALIGNWORKGROUPMEMORYPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

namespace mlir::vmoe {
namespace {

struct VMoEGPUAlignWorkgroupMemoryPass
    : impl::VMoEGPUAlignWorkgroupMemoryPassBase<
          VMoEGPUAlignWorkgroupMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    if (alignment < 1 || !llvm::isPowerOf2_64(alignment)) {
      getOperation().emitError("vmoe-gpu-align-workgroup-memory: alignment "
                               "must be a power of two, got ")
          << static_cast<int64_t>(alignment);
      return signalPassFailure();
    }
    StringAttr name = StringAttr::get(&getContext(),
                                      LLVM::LLVMDialect::getAlignAttrName());
    getOperation().walk([&](gpu::GPUFuncOp func) {
      for (unsigned i = 0, e = func.getNumWorkgroupAttributions(); i < e;
           ++i) {
        auto current = dyn_cast_or_null<IntegerAttr>(
            func.getWorkgroupAttributionAttr(i, name));
        if (current && current.getInt() >= alignment)
          continue;
        func.setWorkgroupAttributionAttr(
            i, name,
            IntegerAttr::get(IntegerType::get(&getContext(), 64), alignment));
      }
    });
  }
};

} // namespace
} // namespace mlir::vmoe
