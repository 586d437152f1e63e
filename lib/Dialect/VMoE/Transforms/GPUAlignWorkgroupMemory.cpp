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

#include "vmoe/Support/OptionChecks.h"
#include "vmoe/Support/PassOptionChecks.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEGPUALIGNWORKGROUPMEMORYPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

namespace mlir::vmoe {
namespace {

/// The largest alignment the option takes (a page).
constexpr int64_t kMaxAlignment = 4096;

struct VMoEGPUAlignWorkgroupMemoryPass
    : PassWithCheckedOptions<VMoEGPUAlignWorkgroupMemoryPass,
                             impl::VMoEGPUAlignWorkgroupMemoryPassBase<
                                 VMoEGPUAlignWorkgroupMemoryPass>> {
  using PassWithCheckedOptions::PassWithCheckedOptions;

  /// A power of two up to kMaxAlignment.
  llvm::Error checkOptions() {
    if (alignment < 1 || alignment > kMaxAlignment ||
        !llvm::isPowerOf2_64(alignment))
      return ::vmoe::optionError(
          "alignment", "must be a power of two in [1, " +
                           llvm::Twine(kMaxAlignment) + "], got " +
                           llvm::Twine(static_cast<int64_t>(alignment)));
    return llvm::Error::success();
  }

  void runOnOperation() override {
    if (failed(verifyOptions()))
      return signalPassFailure();
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
