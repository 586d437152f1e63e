//===- CPUPipeline.cpp - vmoe-lower-to-cpu ----------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The pipeline from tensor-level vmoe IR to the LLVM dialect for the host.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Pipelines/Pipelines.h"

#include "LowerAllocaScopes.h"
#include "RuntimeBufferFunctions.h"
#include "ScopeStackScratch.h"

#include "vmoe/Conversion/Passes.h"
#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/OpenMPToLLVM/ConvertOpenMPToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/SCFToOpenMP/SCFToOpenMP.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::vmoe::buildVMoECPUPipeline(OpPassManager &pm,
                                      const VMoECPUPipelineOptions &options) {
  // vmoe -> tensor-level linalg / scf.
  VMoEBufferSizingPassOptions sizing;
  sizing.capacityRatio = options.capacityRatio;
  pm.addNestedPass<func::FuncOp>(createVMoEBufferSizingPass(sizing));
  // Expert parallelism first: the fusions then leave its chains alone.
  if (options.expertParallel > 0) {
    VMoEExpertParallelPassOptions split;
    split.ranks = options.expertParallel;
    pm.addNestedPass<func::FuncOp>(createVMoEExpertParallelPass(split));
  }
  pm.addPass(createConvertVMoEToMPIRuntimePass());
  if (options.fuse) {
    pm.addNestedPass<func::FuncOp>(createVMoEFuseExpertsPass());
    pm.addNestedPass<func::FuncOp>(createVMoEFuseRoutingPass());
  }
  // Register tiles: 6 x 2 vectors fill 12 of AVX2's 16 registers; with
  // AVX-512's 32, 8 x 3 (24 accumulators) measured 73 vs 60 GFLOP/s.
  bool wide = options.vectorWidth >= 16;
  int64_t tileRows = options.tileRows ? options.tileRows : (wide ? 8 : 6);
  int64_t tileVectors =
      options.tileVectors ? options.tileVectors : (wide ? 3 : 2);
  ConvertVMoEToSCFPassOptions lowering;
  lowering.lanes = options.vectorWidth;
  lowering.tileRows = tileRows;
  lowering.tileVectors = tileVectors;
  lowering.bf16Dot = options.bf16Dot;
  lowering.prefetch = options.prefetchPanels;
  pm.addNestedPass<func::FuncOp>(createConvertVMoEToSCFPass(lowering));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Each GEMM and reduction fills its own destination (CSE shared them).
  pm.addPass(createVMoEUnshareFillInitsPass());

  // Tensors -> buffers; function arguments become identity-layout memrefs.
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  pm.addPass(createCanonicalizerPass());
  bufferization::buildBufferDeallocationPipeline(pm);
  // The packing scratch of the GEMMs built before bufferization, freed per
  // loop iteration (the deallocation pipeline rejects stacksave).
  pm.addNestedPass<func::FuncOp>(vmoe::createScopeStackScratchPass());

  pm.addPass(createVMoELowerStridedCopiesPass());

  // Contractions to the vector microkernel, the rest to loops; then OpenMP
  // threads or sequential loops.
  if (options.vectorize) {
    VMoEVectorizeContractionsPassOptions vectorize;
    vectorize.lanes = options.vectorWidth;
    vectorize.tileRows = tileRows;
    vectorize.tileVectors = tileVectors;
    vectorize.parallel = options.parallel;
    vectorize.prefetch = options.prefetchPanels;
    vectorize.bf16Dot = options.bf16Dot;
    pm.addPass(createVMoEVectorizeContractionsPass(vectorize));
    VMoEVectorizeTransposesPassOptions transposes;
    transposes.lanes = options.vectorWidth;
    transposes.parallel = options.parallel;
    pm.addNestedPass<func::FuncOp>(
        createVMoEVectorizeTransposesPass(transposes));
  }
  // The rest (norms, softmax, adds, activations, copies): large ones over
  // chunks of rows on threads too.
  if (options.parallel && options.parallelLinalg)
    pm.addNestedPass<func::FuncOp>(createVMoEParallelLinalgPass());
  if (options.streamingStores) {
    VMoEStreamingStoresPassOptions streaming;
    streaming.lanes = options.vectorWidth;
    pm.addPass(createVMoEStreamingStoresPass(streaming));
  }
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  if (options.parallel) {
    pm.addNestedPass<func::FuncOp>(createForallToParallelLoopPass());
    pm.addPass(createConvertSCFToOpenMPPass());
    // Its loop bodies come in alloca scopes, which convert-scf-to-cf cannot
    // lower around the microkernel's stack scratch (LowerAllocaScopes.cpp).
    pm.addNestedPass<func::FuncOp>(vmoe::createLowerAllocaScopesPass());
    // Few, unequal iterations (experts, column blocks): taken dynamically.
    if (options.dynamicSchedule) {
      pm.addPass(createVMoEBalanceOMPLoopsPass());
      pm.addNestedPass<func::FuncOp>(createVMoEClaimOMPIterationsPass());
    }
  } else {
    pm.addNestedPass<func::FuncOp>(createForallToForLoopPass());
  }
  pm.addPass(createLoopInvariantCodeMotionPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // Everything to the LLVM dialect.
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  if (options.vectorize)
    pm.addPass(createVMoEApproximateMathPass());
  // Math first: libm calls for vector math unroll into vector ops.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  // x86vector.avx512.dot (bf16 expert GEMMs) -> llvm.x86.avx512bf16.*.
  ConvertVectorToLLVMPassOptions vectorToLLVM;
  vectorToLLVM.x86Vector = options.bf16Dot;
  pm.addPass(createConvertVectorToLLVMPass(vectorToLLVM));
  // ub.poison: the undefined start of vectors built by vector lowerings
  // (the 8 x 8 shuffle transposes of packed transposed B operands).
  pm.addPass(createUBToLLVMConversionPass());
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  memrefToLLVM.useGenericFunctions = options.cachedBuffers;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  if (options.cachedBuffers)
    pm.addPass(vmoe::createRuntimeBufferFunctionsPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  if (options.parallel)
    pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}
