//===- Blocks.h - Thread blocks of the GPU emulator -------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The blocks of a launch run one after another; the threads of a block are
// fibers on the calling thread, switched only at synchronization points
// (bar.sync, the warp-level instructions), in thread order, so a run is
// deterministic. Strict where hardware is undefined: a barrier reached
// after some threads exited, lanes of a warp at different warp
// instructions, and a deadlock are launch errors with a message.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_LIB_RUNTIME_GPUEMULATOR_BLOCKS_H
#define VMOE_LIB_RUNTIME_GPUEMULATOR_BLOCKS_H

#include "vmoe/Runtime/GPUEmulator/vmoe_gpu_emulator.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vmoe::emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  unsigned count() const { return x * y * z; }
};

/// A shared-memory variable of a module.
struct SharedVariable {
  void *address;
  uint64_t bytes;
};

/// Runs every block of a launch. Returns false with `error` set when a
/// block failed (the message names the block).
bool runGrid(vmoe_emu_kernel_entry entry, void **params, Dim3 grid,
             Dim3 block, const std::vector<SharedVariable> &shared,
             std::string &error);

/// What a lane hands to a warp-level instruction.
struct LaneData {
  uint32_t words[8];
  float accumulators[4];
  const void *address;
  int32_t lane, clamp;
  uint32_t mask;
};

/// The special registers of the running thread (vmoe_emu_sreg values).
int32_t specialRegister(int32_t which);

/// bar.sync over the block of the running thread.
void blockBarrier();

/// A warp-level instruction: publishes `mine`, waits for every lane of the
/// warp, calls `compute` with all lanes' data (indexed by lane), then waits
/// again so that no lane reuses its slot before all have read. `op` names
/// the instruction (lanes at different ones are an error); `fullWarp`
/// requires 32 lanes (mma, ldmatrix).
void warpCollective(const char *op, bool fullWarp, const LaneData &mine,
                    const std::function<void(const LaneData *lanes,
                                             unsigned count, unsigned lane)>
                        &compute);

/// Asynchronous copies of the running thread (cp.async): queued, and
/// carried out by wait(n) for all but the newest n committed groups.
void asyncCopy(void *destination, const void *source, int32_t size,
               int32_t sourceSize);
void asyncCommit();
void asyncWait(int32_t pending);

/// Fails the running block with `message` (never returns to the caller's
/// thread code).
[[noreturn]] void fail(const std::string &message);

} // namespace vmoe::emu

#endif // VMOE_LIB_RUNTIME_GPUEMULATOR_BLOCKS_H
