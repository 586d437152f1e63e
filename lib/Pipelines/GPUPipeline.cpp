//===- GPUPipeline.cpp - vmoe-lower-to-nvvm ---------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The pipeline from tensor-level vmoe IR to host LLVM code with NVVM
// kernels. vmoe passes are added directly; the long tail of upstream GPU
// passes is parsed from their textual pipeline, which keeps their options
// readable and this file free of a dozen pass headers.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Pipelines/Pipelines.h"

#include "vmoe/Conversion/Passes.h"
#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

/// Appends a textual pipeline (on the module) to `pm`.
static LogicalResult addTextual(OpPassManager &pm, StringRef pipeline) {
  return parsePassPipeline(pipeline, pm, llvm::errs());
}

LogicalResult
mlir::vmoe::buildVMoENVVMPipeline(OpPassManager &pm,
                                  const VMoENVVMPipelineOptions &options) {
  // vmoe -> fused experts on GPU kernels, the rest to tensor-level loops.
  VMoEBufferSizingPassOptions sizing;
  sizing.capacityRatio = options.capacityRatio;
  pm.addNestedPass<func::FuncOp>(createVMoEBufferSizingPass(sizing));
  pm.addNestedPass<func::FuncOp>(createVMoEFuseExpertsPass());
  ConvertVMoEToGPUPassOptions gpu;
  gpu.mma = options.gpuMma;
  pm.addNestedPass<func::FuncOp>(createConvertVMoEToGPUPass(gpu));
  pm.addNestedPass<func::FuncOp>(createConvertVMoEToSCFPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // Buffers: the function's buffers are freed when it returns (host code is
  // straight-line; the ownership-based deallocation pipeline does not
  // accept GPU launches); below, host buffers become device memory and
  // per-thread scratch the thread's private memory.
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  pm.addPass(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createVMoEDeallocAtExitPass());
  pm.addPass(createVMoELowerStridedCopiesPass());
  pm.addPass(createVMoEContractToFMAPass());

  // Loops -> kernels: each top-level f32 contraction becomes a tiled GEMM
  // kernel, each other top-level parallel loop one launch over all of its
  // dims (blocks x threads, grid-stride); host buffers live on
  // the device, and one stream carries every copy, allocation and launch of
  // a call, synchronized once before it returns.
  VMoEGPUContractionsPassOptions contractions;
  contractions.mma = options.gpuMma;
  pm.addNestedPass<func::FuncOp>(createVMoEGPUContractionsPass(contractions));
  pm.addNestedPass<func::FuncOp>(createVMoEGPULinalgToLoopsPass());
  VMoEGPUMapParallelLoopsPassOptions mapping;
  mapping.threadsPerBlock = options.threadsPerBlock;
  pm.addNestedPass<func::FuncOp>(createVMoEGPUMapParallelLoopsPass(mapping));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addNestedPass<func::FuncOp>(createVMoEGPUDeviceBuffersPass());
  // Constants and dims used by a kernel are sunk into it first (outlining
  // would pass them as arguments: no folding, 64-bit divisions by unknown
  // values in every kernel).
  if (failed(addTextual(pm, "lower-affine,func.func(gpu-launch-sink-index-"
                            "computations),gpu-kernel-outlining,"
                            "func.func(gpu-async-region)")))
    return failure();
  // Shared buffers 16-byte aligned (cp.async, ldmatrix, vector accesses).
  pm.addPass(createVMoEGPUAlignWorkgroupMemoryPass());
  if (options.mergeKernelModules)
    pm.addPass(createVMoEGPUMergeKernelModulesPass());
  pm.addPass(createVMoEApproximateMathPass());

  // Device code -> NVVM -> cubin (ptxas without fused multiply-add
  // contraction: explicit fma ops only, as on the CPU); or, for the
  // emulator, NVVM -> host functions run by libvmoe_gpu_emulator.so.
  bool emulate = options.format == "emulator";
  std::string device = llvm::formatv(
      "{0}gpu.module(convert-scf-to-cf,expand-strided-metadata,lower-affine,"
      "convert-nvgpu-to-nvvm,convert-gpu-to-nvvm,canonicalize,cse,"
      "reconcile-unrealized-casts)",
      emulate ? "" : llvm::formatv("nvvm-attach-target{{chip={0} O=3},",
                                   options.chip)
                         .str());
  if (failed(addTextual(pm, device)))
    return failure();
  if (emulate)
    pm.addPass(createVMoEGPUEmulateKernelsPass());
  else if (failed(addTextual(
               pm, llvm::formatv("gpu-module-to-binary{{format={0} "
                                 "toolkit={1} opts=--fmad=false}",
                                 options.format, options.toolkit)
                       .str())))
    return failure();

  // Host code -> LLVM with mgpu runtime calls.
  return addTextual(
      pm, "convert-scf-to-cf,expand-strided-metadata,lower-affine,"
          "convert-math-to-llvm,convert-math-to-libm,convert-vector-to-llvm,"
          "finalize-memref-to-llvm,convert-arith-to-llvm,"
          "convert-index-to-llvm,gpu-to-llvm,convert-func-to-llvm,"
          "convert-cf-to-llvm,reconcile-unrealized-casts,canonicalize");
}
