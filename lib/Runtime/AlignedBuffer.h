//===- AlignedBuffer.h - Zeroed, 64-byte aligned arrays ---------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The buffers handed to the compiled forward pass (weights, one batch of
// images, logits, statistics) start on a cache line, as the memrefs the
// compiled code allocates itself do. Allocation failure is reported, not
// fatal, because the weights buffer size comes from the manifest. Internal to
// lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_ALIGNEDBUFFER_H
#define LIB_RUNTIME_ALIGNEDBUFFER_H

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace vmoe::runtime {

/// An owned array of trivially copyable `T`, zero-initialized and aligned to
/// 64 bytes.
template <typename T> class AlignedBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "raw storage only");

public:
  /// Alignment of the first element, in bytes.
  static constexpr size_t kAlignment = 64;
  /// Buffers of at least this many bytes are aligned to it and advised
  /// to use huge pages (x86-64's 2 MB page).
  static constexpr size_t kHugePage = size_t(2) << 20;

  AlignedBuffer() = default;

  /// Allocates `count` elements (at least one cache line). Returns false,
  /// leaving the buffer empty, when the size overflows or memory runs out.
  /// With `zero` false the memory is left as the allocator returns it
  /// (untouched pages stay unmapped: an expert parallel rank's weights).
  bool allocate(size_t count, bool zero = true) {
    data.reset();
    size = 0;
    if (count > (std::numeric_limits<size_t>::max() - kAlignment) / sizeof(T))
      return false;
    size_t bytes = count * sizeof(T);
    bytes = bytes == 0 ? kAlignment
                       : (bytes + kAlignment - 1) / kAlignment * kAlignment;
    // Large buffers (the weights) start on a 2 MB boundary and ask for
    // transparent huge pages: a forward streams every expert's weights, and
    // with 4 KB pages each 4 KB of them costs a page walk.
    bool huge = bytes >= kHugePage;
    if (huge)
      bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void *memory = std::aligned_alloc(huge ? kHugePage : kAlignment, bytes);
    if (!memory)
      return false;
    if (huge)
      adviseHugePages(memory, bytes);
    if (zero)
      std::memset(memory, 0, bytes);
    data.reset(static_cast<T *>(memory));
    size = count;
    return true;
  }

  T *get() { return data.get(); }
  const T *get() const { return data.get(); }
  /// Number of elements.
  size_t length() const { return size; }
  /// Frees the memory.
  void release() {
    data.reset();
    size = 0;
  }

private:
  /// madvise(MADV_HUGEPAGE) where the kernel has it; a refusal (THP off)
  /// only leaves the 4 KB pages.
  static void adviseHugePages(void *memory, size_t bytes) {
#ifdef MADV_HUGEPAGE
    (void)madvise(memory, bytes, MADV_HUGEPAGE);
#else
    (void)memory;
    (void)bytes;
#endif
  }

  /// Releases memory from std::aligned_alloc.
  struct Free {
    void operator()(T *pointer) const { std::free(pointer); }
  };

  std::unique_ptr<T, Free> data;
  size_t size = 0;
};

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_ALIGNEDBUFFER_H
