//===- BufferCache.cpp - Heap buffers of compiled code, kept between calls ===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Each buffer starts `headerBytes` after the start of its system block; the
// 32 bytes before it record the block, the size and the alignment, so that
// vmoe_buffer_free needs only the pointer. Blocks are kept in exact
// (size, alignment) bins.
//
//===----------------------------------------------------------------------===//

#include "BufferCache.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace {

struct Header {
  void *block;
  size_t size;
  size_t alignment;
  size_t reserved;
};
static_assert(sizeof(Header) == 32, "the header fits below any alignment");

/// Every buffer is aligned to at least a cache line.
constexpr size_t kMinAlignment = 64;

struct Cache {
  std::mutex mutex;
  std::map<std::pair<size_t, size_t>, std::vector<void *>> bins;
  size_t bytes = 0;
};

Cache &cache() {
  static Cache *instance = new Cache; // never destroyed: used at exit too
  return *instance;
}

Header *headerOf(void *buffer) {
  return static_cast<Header *>(buffer) - 1;
}

[[noreturn]] void outOfMemory(size_t size) {
  std::fprintf(stderr, "vmoe: out of memory allocating a %zu-byte buffer\n",
               size);
  std::abort();
}

void *allocate(size_t alignment, size_t size) {
  if (alignment < kMinAlignment || (alignment & (alignment - 1)))
    alignment = alignment < kMinAlignment ? kMinAlignment
                                          : size_t(1) << (64 - __builtin_clzll(
                                                              alignment));
  Cache &c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto bin = c.bins.find({size, alignment});
    if (bin != c.bins.end() && !bin->second.empty()) {
      void *buffer = bin->second.back();
      bin->second.pop_back();
      c.bytes -= size;
      return buffer;
    }
  }
  // The header sits in the alignment's first bytes before the buffer.
  size_t headerBytes = alignment;
  if (size > SIZE_MAX - headerBytes)
    outOfMemory(size);
  void *block = nullptr;
  if (posix_memalign(&block, alignment, headerBytes + size) != 0)
    outOfMemory(size);
  void *buffer = static_cast<char *>(block) + headerBytes;
  *headerOf(buffer) = Header{block, size, alignment, 0};
  return buffer;
}

} // namespace

extern "C" void *vmoe_buffer_alloc(size_t size) {
  return allocate(kMinAlignment, size);
}

extern "C" void *vmoe_buffer_aligned_alloc(size_t alignment, size_t size) {
  return allocate(alignment, size);
}

extern "C" void vmoe_buffer_free(void *buffer) {
  if (!buffer)
    return;
  Header header = *headerOf(buffer);
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.bins[{header.size, header.alignment}].push_back(buffer);
  c.bytes += header.size;
}

void vmoe::runtime::releaseCachedBuffers() {
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto &[key, buffers] : c.bins)
    for (void *buffer : buffers)
      std::free(headerOf(buffer)->block);
  c.bins.clear();
  c.bytes = 0;
}

size_t vmoe::runtime::cachedBufferBytes() {
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.bytes;
}
