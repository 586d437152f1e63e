// huge_pages.cpp - AlignedBuffer's huge-page advice
// (test/Runtime/huge-pages.test).
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM
// Exceptions.
//
// A buffer of 2 MB or more starts on a 2 MB boundary and its mapping
// carries the huge-page advice ("hg" in /proc/self/smaps' VmFlags); a small
// one keeps the 64-byte alignment and no advice. Prints one line per check
// and the number of failures.

#include "AlignedBuffer.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

using vmoe::runtime::AlignedBuffer;

static int failures = 0;

static void check(bool ok, const char *what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what);
  failures += ok ? 0 : 1;
}

/// Whether the VmFlags of the mapping holding `address` include `flag`.
static bool mappingHasFlag(const void *address, const char *flag) {
  std::FILE *smaps = std::fopen("/proc/self/smaps", "r");
  if (!smaps)
    return false;
  auto at = reinterpret_cast<uintptr_t>(address);
  char line[512];
  bool inside = false, found = false;
  while (std::fgets(line, sizeof line, smaps)) {
    unsigned long begin, end;
    if (std::sscanf(line, "%lx-%lx ", &begin, &end) == 2) {
      inside = at >= begin && at < end;
      continue;
    }
    if (inside && std::strncmp(line, "VmFlags:", 8) == 0) {
      char padded[520];
      std::snprintf(padded, sizeof padded, "%s ", line + 8);
      char wanted[16];
      std::snprintf(wanted, sizeof wanted, " %s ", flag);
      found = std::strstr(padded, wanted) != nullptr;
      break;
    }
  }
  std::fclose(smaps);
  return found;
}

int main() {
  AlignedBuffer<float> large;
  check(large.allocate((size_t(3) << 20) / sizeof(float)), "allocate 3 MB");
  check(reinterpret_cast<uintptr_t>(large.get()) % (size_t(2) << 20) == 0,
        "3 MB buffer on a 2 MB boundary");
  check(large.get()[0] == 0 && large.get()[large.length() - 1] == 0,
        "3 MB buffer zeroed");
  check(mappingHasFlag(large.get(), "hg"), "3 MB buffer advised huge pages");

  AlignedBuffer<float> small;
  check(small.allocate(256), "allocate 1 KB");
  check(reinterpret_cast<uintptr_t>(small.get()) % 64 == 0,
        "1 KB buffer on a cache line");
  check(!mappingHasFlag(small.get(), "hg"), "1 KB buffer not advised");
  std::printf("huge_pages: %d failures\n", failures);
  return failures != 0;
}
