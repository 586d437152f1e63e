//===- GPUMergeKernelModules.cpp - Merge kernel modules ---------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// All outlined gpu.module ops -> one, with gpu.launch_func retargeted, so
// that the kernels of a module serialize to one PTX module or cubin.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/IR/SymbolTable.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEGPUMERGEKERNELMODULESPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

/// The attributes of `module` other than its name.
static DictionaryAttr attributesBesidesName(gpu::GPUModuleOp module) {
  NamedAttrList attributes(module->getAttrDictionary());
  attributes.erase(SymbolTable::getSymbolAttrName());
  return attributes.getDictionary(module.getContext());
}

namespace mlir::vmoe {
namespace {

struct VMoEGPUMergeKernelModulesPass
    : impl::VMoEGPUMergeKernelModulesPassBase<VMoEGPUMergeKernelModulesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> kernelModules(
        module.getOps<gpu::GPUModuleOp>());
    if (kernelModules.size() < 2)
      return;
    gpu::GPUModuleOp target = kernelModules.front();
    DictionaryAttr targetAttributes = attributesBesidesName(target);
    SymbolTable targetTable(target);
    // Kernels by (old module, old name) -> new name in `target`.
    DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> moved;
    for (gpu::GPUModuleOp source : llvm::drop_begin(kernelModules)) {
      if (attributesBesidesName(source) != targetAttributes) {
        source.emitOpError("has attributes other than those of @")
            << target.getName() << "; merge kernel modules before "
            << "attaching targets";
        return signalPassFailure();
      }
      // Rename first, while every use is still inside `source`.
      SymbolTable sourceTable(source);
      SmallVector<std::pair<StringAttr, Operation *>> symbols;
      for (Operation &op : source.getBody()->getOperations()) {
        auto symbol = dyn_cast<SymbolOpInterface>(op);
        if (!symbol)
          continue;
        symbols.emplace_back(symbol.getNameAttr(), &op);
        if (!targetTable.lookup(symbol.getNameAttr()))
          continue;
        if (failed(sourceTable.renameToUnique(&op, {&targetTable}))) {
          op.emitOpError("could not be renamed while merging kernel modules");
          return signalPassFailure();
        }
      }
      for (auto [oldName, op] : symbols) {
        sourceTable.remove(op);
        op->remove();
        moved[{source.getNameAttr(), oldName}] = targetTable.insert(op);
      }
      for (Operation &op :
           llvm::make_early_inc_range(source.getBody()->getOperations()))
        op.moveBefore(target.getBody(), target.getBody()->end());
    }
    // Host launches name their kernel as @module::@kernel.
    module.walk([&](gpu::LaunchFuncOp launch) {
      auto it =
          moved.find({launch.getKernelModuleName(), launch.getKernelName()});
      if (it == moved.end())
        return;
      launch.setKernelAttr(SymbolRefAttr::get(
          target.getNameAttr(), {FlatSymbolRefAttr::get(it->second)}));
    });
    for (gpu::GPUModuleOp source : llvm::drop_begin(kernelModules))
      source.erase();
  }
};

} // namespace
} // namespace mlir::vmoe
