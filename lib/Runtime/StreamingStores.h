//===- StreamingStores.h - When norms write with non-temporal stores ------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Compiled CPU models (vmoe-lower-to-cpu{streaming-stores}, which
// vmoe-compile sets) write the outputs of their norms with non-temporal
// stores while the global vmoe_streaming_stores is non-zero. Those outputs
// are read by every thread of the next GEMM, so the next call overwrites
// lines the other cores hold: on some hosts that costs 16-18x a write of
// lines a core holds alone, on others 5x. Non-temporal stores pay where it
// is 16x and lose a little where it is 5x (the next GEMM reads from
// memory), so the runtime measures the host before a forward pass, again
// every few seconds (the host's state can change), and sets the global.
// Internal to lib/Runtime (hidden in model libraries).
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_STREAMINGSTORES_H
#define LIB_RUNTIME_STREAMINGSTORES_H

#include <cstdint>

extern "C" {
/// Non-zero: the compiled norms write with non-temporal stores.
extern int32_t vmoe_streaming_stores;
}

namespace vmoe::runtime {

/// Before a CPU forward pass: with two or more OpenMP threads, measures the
/// host's cross-core write factor when the last measurement is older than a
/// few seconds (not on the first call: the threads are still being placed)
/// and sets vmoe_streaming_stores. The environment variable
/// VMOE_STREAMING_STORES = on | off overrides the measurement (auto, the
/// default, measures).
void updateStreamingStores();

/// The last measured factor: the time to overwrite rows that every thread
/// has just read over the time to overwrite rows only the writing thread
/// has read (0 before the first measurement).
double lastCrossCoreWriteFactor();

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_STREAMINGSTORES_H
