//===- FuzzFile.h - Fuzz input as a file for path-based readers -*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The runtime's readers take paths (they map files); the fuzzers write each
// input to one file per process in /dev/shm (or $TMPDIR) first.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_FUZZ_FUZZFILE_H
#define VMOE_FUZZ_FUZZFILE_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace vmoe::fuzz {

/// Writes `data` to this process's scratch file and returns its path.
inline const std::string &writeFuzzFile(const uint8_t *data, size_t size,
                                        const char *suffix) {
  static const std::string path = [&] {
    const char *dir = std::getenv("TMPDIR");
    std::string base = access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                       : dir                         ? dir
                                                     : "/tmp";
    return base + "/vmoe-fuzz-" + std::to_string(getpid()) + suffix;
  }();
  FILE *file = std::fopen(path.c_str(), "wb");
  if (!file)
    std::abort();
  if (size && std::fwrite(data, 1, size, file) != size)
    std::abort();
  std::fclose(file);
  return path;
}

} // namespace vmoe::fuzz

#endif // VMOE_FUZZ_FUZZFILE_H
