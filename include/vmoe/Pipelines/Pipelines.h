//===- Pipelines.h - vmoe pass pipelines ------------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Option structs and builders of the registered pipelines. vmoe-opt exposes
// them as `--vmoe-lower-to-cpu`; vmoe-compile calls the same builders.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_PIPELINES_PIPELINES_H
#define VMOE_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::vmoe {

/// Options of `vmoe-lower-to-cpu`.
struct VMoECPUPipelineOptions
    : public PassPipelineOptions<VMoECPUPipelineOptions> {
  PassOptions::Option<double> capacityRatio{
      *this, "capacity-ratio",
      llvm::cl::desc("Capacity ratio C for every unsized dispatch (0: each "
                     "op's own)"),
      llvm::cl::init(0.0)};
  PassOptions::Option<bool> parallel{
      *this, "parallel",
      llvm::cl::desc("Run the parallel loops (groups, tokens, experts) on "
                     "OpenMP threads; results do not depend on the count"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> fuse{
      *this, "fuse",
      llvm::cl::desc("Fuse dispatch, expert_ffn and combine (compute only the "
                     "filled rows; default)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> vectorize{
      *this, "vectorize",
      llvm::cl::desc("Contractions through the vector microkernel and math "
                     "through polynomial approximations (default)"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> vectorWidth{
      *this, "vector-width",
      llvm::cl::desc("f32 lanes per vector register (8: AVX2, 16: AVX-512)"),
      llvm::cl::init(8)};
};

/// vmoe (tensors) -> LLVM dialect for the host CPU: buffer sizing, the vmoe
/// lowering, bufferization with identity-layout function boundaries, buffer
/// deallocation, loops, and the conversions to LLVM.
void buildVMoECPUPipeline(OpPassManager &pm,
                          const VMoECPUPipelineOptions &options);

/// Registers `vmoe-lower-to-cpu` with the global pass registry.
void registerVMoEPipelines();

} // namespace mlir::vmoe

#endif // VMOE_PIPELINES_PIPELINES_H
