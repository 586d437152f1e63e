//===- BufferCache.h - Heap buffers of compiled code, kept between calls --===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Compiled models (vmoe-lower-to-cpu{cached-buffers}, which vmoe-compile
// sets) allocate their intermediate buffers with vmoe_buffer_alloc /
// vmoe_buffer_aligned_alloc and free them with vmoe_buffer_free. A freed
// buffer is kept, by size and alignment, for the next request of that size:
// the same forward pass asks for the same buffers on every call, so after
// the first call none of its buffers comes from the system (no mmap, page
// faults or page zeroing per call). The cache holds at most what one call
// had allocated at once per size; vmoe_model_free releases it. Thread safe.
// Internal to lib/Runtime (hidden in model libraries).
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_BUFFERCACHE_H
#define LIB_RUNTIME_BUFFERCACHE_H

#include <cstddef>

extern "C" {
/// malloc(size) and aligned_alloc(alignment, size) for compiled code; never
/// null (out of memory prints one line and aborts, where the compiled code
/// would crash on a null buffer).
void *vmoe_buffer_alloc(size_t size);
void *vmoe_buffer_aligned_alloc(size_t alignment, size_t size);
/// Keeps the buffer for the next request of its size (null is ignored).
void vmoe_buffer_free(void *buffer);
}

namespace vmoe::runtime {

/// Returns every kept buffer to the system.
void releaseCachedBuffers();

/// Bytes kept for reuse now (tests, statistics).
size_t cachedBufferBytes();

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_BUFFERCACHE_H
