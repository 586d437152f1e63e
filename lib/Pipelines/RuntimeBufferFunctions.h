//===- RuntimeBufferFunctions.h - heap buffers from the runtime -*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Internal to lib/Pipelines (a step of vmoe-lower-to-cpu{cached-buffers}).
//
//===----------------------------------------------------------------------===//

#ifndef LIB_PIPELINES_RUNTIMEBUFFERFUNCTIONS_H
#define LIB_PIPELINES_RUNTIMEBUFFERFUNCTIONS_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlir::vmoe {

/// module pass, after finalize-memref-to-llvm{use-generic-functions}: calls
/// of MLIR's generic allocation functions (_mlir_memref_to_llvm_alloc,
/// _aligned_alloc, _free) call the vmoe runtime's buffer cache instead
/// (vmoe_buffer_alloc, vmoe_buffer_aligned_alloc, vmoe_buffer_free;
/// lib/Runtime/BufferCache.cpp). Own names, so that a process that also
/// loads MLIR's runner utilities (which define the generic functions with
/// plain malloc) keeps each pair of alloc and free together.
std::unique_ptr<Pass> createRuntimeBufferFunctionsPass();

} // namespace mlir::vmoe

#endif // LIB_PIPELINES_RUNTIMEBUFFERFUNCTIONS_H
