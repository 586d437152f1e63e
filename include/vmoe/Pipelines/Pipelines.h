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
#include "llvm/Support/Error.h"

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
  PassOptions::Option<int64_t> tileRows{
      *this, "tile-rows",
      llvm::cl::desc("Rows of the microkernel's register tile (0: 8 for 16 "
                     "lanes, else 6)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> tileVectors{
      *this, "tile-vectors",
      llvm::cl::desc("Vectors per row of the register tile (0: 3 for 16 "
                     "lanes, else 2)"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> bf16Dot{
      *this, "bf16-dot",
      llvm::cl::desc("bf16 expert GEMMs with vdpbf16ps (the target has "
                     "AVX512_BF16; vmoe-compile sets it from the target's "
                     "features), else shift + f32 fma"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> dynamicSchedule{
      *this, "dynamic-schedule",
      llvm::cl::desc("With parallel: threads take the iterations of the "
                     "reduction-free parallel loops of unequal work one at a "
                     "time (vmoe-balance-omp-loops; default), else one "
                     "contiguous chunk each"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> parallelLinalg{
      *this, "parallel-linalg",
      llvm::cl::desc("With parallel: large linalg ops the microkernel does "
                     "not take (norms, softmax, adds, copies) run over chunks "
                     "of rows on threads (vmoe-parallel-linalg; default)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> prefetchPanels{
      *this, "prefetch-panels",
      llvm::cl::desc("GEMMs reading weight panels prefetch the next column "
                     "panel's lines while computing the current one, and "
                     "each tile the lines its epilogue will store and add "
                     "(default)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> cachedBuffers{
      *this, "cached-buffers",
      llvm::cl::desc("Heap buffers come from the vmoe runtime's buffer cache "
                     "(vmoe_buffer_alloc/free: a buffer freed by one call is "
                     "reused by the next, no page faults per call) instead "
                     "of malloc/free; the code must be linked with the "
                     "runtime (vmoe-compile sets it)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> streamingStores{
      *this, "streaming-stores",
      llvm::cl::desc("Norm outputs may be written with non-temporal stores, "
                     "switched at run time by the vmoe runtime's "
                     "vmoe_streaming_stores global (vmoe-streaming-stores); "
                     "the code must be linked with the runtime (vmoe-compile "
                     "sets it)"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> expertParallel{
      *this, "expert-parallel",
      llvm::cl::desc("Split the experts of each token choice MoE layer over "
                     "this many MPI ranks (0: one process; "
                     "docs/Distributed.md)"),
      llvm::cl::init(0)};
};

/// Checks the values of `options` (ranges of the numbers); the error names
/// the first bad option. The registered pipeline checks them where they are
/// parsed, before anything runs.
llvm::Error checkVMoECPUPipelineOptions(const VMoECPUPipelineOptions &options);

/// vmoe (tensors) -> LLVM dialect for the host CPU: buffer sizing, the vmoe
/// lowering, bufferization with identity-layout function boundaries, buffer
/// deallocation, loops, and the conversions to LLVM.
void buildVMoECPUPipeline(OpPassManager &pm,
                          const VMoECPUPipelineOptions &options);

/// Options of `vmoe-lower-to-nvvm`.
struct VMoENVVMPipelineOptions
    : public PassPipelineOptions<VMoENVVMPipelineOptions> {
  PassOptions::Option<double> capacityRatio{
      *this, "capacity-ratio",
      llvm::cl::desc("Capacity ratio C for every unsized dispatch (0: each "
                     "op's own)"),
      llvm::cl::init(0.0)};
  PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("GPU architecture (sm_90, sm_80, ...)"),
      llvm::cl::init("sm_90")};
  PassOptions::Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit with ptxas (cubin) and libdevice"),
      llvm::cl::init("/usr/local/cuda")};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Kernel binary: bin (cubin, default), isa (PTX), fatbin, "
                     "or emulator (kernels compiled for the host CPU, run "
                     "by libvmoe_gpu_emulator.so; no CUDA toolkit needed)"),
      llvm::cl::init("bin")};
  PassOptions::Option<int64_t> threadsPerBlock{
      *this, "threads-per-block",
      llvm::cl::desc("Threads of the blocks that run mapped parallel loops"),
      llvm::cl::init(256)};
  PassOptions::Option<bool> mergeKernelModules{
      *this, "merge-kernel-modules",
      llvm::cl::desc("Put all kernels into one gpu.module (one PTX module or "
                     "cubin) instead of one per launch"),
      llvm::cl::init(false)};
  PassOptions::Option<std::string> gpuMma{
      *this, "gpu-mma",
      llvm::cl::desc("GEMM instructions (experts, dense layers, attention): "
                     "none (FP32 SIMT, exact, the default), tf32 or bf16 "
                     "(tensor cores, mma.sync)"),
      llvm::cl::init("none")};
};

/// Checks the values of `options` (names, ranges); the error names the first
/// bad option.
llvm::Error
checkVMoENVVMPipelineOptions(const VMoENVVMPipelineOptions &options);

/// Checks a CUDA architecture, `sm_` and digits with an optional letter
/// (sm_90, sm_90a): the only names the textual pipeline it goes into takes.
llvm::Error checkGPUChip(llvm::StringRef option, llvm::StringRef chip);

/// Checks a CUDA toolkit folder: not empty, and without the characters that
/// end a value of a textual pipeline (space, comma, braces, quotes).
llvm::Error checkCUDAToolkitPath(llvm::StringRef option, llvm::StringRef path);

/// vmoe (tensors) -> host LLVM code launching NVVM kernels: buffer sizing
/// and expert fusion, tiled GEMM kernels for the experts, the other ops as
/// parallel loops mapped to blocks and threads, device memory for host
/// buffers and one stream per call, NVVM and a cubin through the toolkit's ptxas, then the host side
/// to LLVM with calls of the mgpu runtime ABI.
LogicalResult buildVMoENVVMPipeline(OpPassManager &pm,
                                    const VMoENVVMPipelineOptions &options);

/// Registers `vmoe-lower-to-cpu` and `vmoe-lower-to-nvvm` with the global
/// pass registry.
void registerVMoEPipelines();

} // namespace mlir::vmoe

#endif // VMOE_PIPELINES_PIPELINES_H
