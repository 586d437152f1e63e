//===- Blocks.cpp - Thread blocks of the GPU emulator -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "Blocks.h"

#include <cstring>
#include <deque>
#include <sys/mman.h>
#include <ucontext.h>

using namespace vmoe::emu;

//===----------------------------------------------------------------------===//
// Contexts: on x86-64 a switch saves the callee-saved registers, MXCSR and
// the x87 control word on the stack and swaps stack pointers (no system
// call; swapcontext's signal mask costs two); elsewhere ucontext.
//===----------------------------------------------------------------------===//

#if defined(__x86_64__)
extern "C" void vmoe_emu_switch(void **save, void *load);
asm(R"(
  .text
  .p2align 4
  .type vmoe_emu_switch,@function
vmoe_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size vmoe_emu_switch, .-vmoe_emu_switch
)");

namespace {
struct Context {
  void *sp = nullptr;
};

/// Prepares `c` to run `start` on the stack [base, base + size) at its
/// first switch; `start` must not return.
void initContext(Context &c, void *base, size_t size, void (*start)()) {
  auto top = reinterpret_cast<uintptr_t>(base) + size;
  top &= ~uintptr_t{15};
  auto *slot = reinterpret_cast<uint64_t *>(top);
  *--slot = 0;                                   // start's return address
  *--slot = reinterpret_cast<uint64_t>(start);   // popped by ret (16-aligned)
  for (int i = 0; i < 6; ++i)
    *--slot = 0;                                 // rbp, rbx, r12-r15
  uint32_t control[2];
  asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(control[0]), "=m"(control[1]));
  *--slot = control[0] | static_cast<uint64_t>(control[1] & 0xffff) << 32;
  c.sp = slot;
}

void switchContext(Context &from, Context &to) {
  vmoe_emu_switch(&from.sp, to.sp);
}
} // namespace
#else
namespace {
struct Context {
  ucontext_t uc;
};

void initContext(Context &c, void *base, size_t size, void (*start)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = base;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, start, 0);
}

void switchContext(Context &from, Context &to) {
  swapcontext(&from.uc, &to.uc);
}
} // namespace
#endif

namespace {

/// Stack of one emulated thread (kernels keep per-thread scratch there).
constexpr size_t kStackBytes = 512 * 1024;
constexpr unsigned kWarpSize = 32;

enum class State { Runnable, AtBarrier, AtWarp, Done, Failed };

struct AsyncCopy {
  void *destination;
  const void *source;
  int32_t size, sourceSize;

  void perform() const {
    std::memcpy(destination, source, sourceSize);
    std::memset(static_cast<char *>(destination) + sourceSize, 0,
                size - sourceSize);
  }
};

struct Thread {
  Context context;
  unsigned tid[3];
  unsigned linear;
  State state = State::Runnable;
  std::vector<AsyncCopy> pending;
  std::deque<std::vector<AsyncCopy>> groups;
};

struct Warp {
  unsigned size = 0, arrived = 0;
  const char *op = nullptr;
  LaneData lanes[kWarpSize];
};

struct Block {
  vmoe_emu_kernel_entry entry;
  void **params;
  Dim3 id, dim, grid;
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  unsigned live = 0, barrierArrived = 0;
  Context scheduler;
  std::string error;
};

Block *block = nullptr;
Thread *current = nullptr;
/// Stacks, kept across launches.
std::vector<void *> stacks;

void yieldToScheduler() { switchContext(current->context, block->scheduler); }

std::string where(const Thread &t) {
  return "thread (" + std::to_string(t.tid[0]) + ", " +
         std::to_string(t.tid[1]) + ", " + std::to_string(t.tid[2]) + ")";
}

void threadMain() {
  block->entry(block->params);
  Thread &t = *current;
  // Copies still in flight: on a GPU they land at some time after their
  // issue, possibly over shared memory the block uses for something else
  // by then (a zero-fill of a stage the epilogue reuses). The emulator would
  // land them late and hide that, so a thread that ends without waiting
  // for all of its copies fails the launch.
  size_t inFlight = t.pending.size();
  for (const std::vector<AsyncCopy> &group : t.groups)
    inFlight += group.size();
  if (inFlight != 0 && block->error.empty())
    block->error = where(t) + " exited with " + std::to_string(inFlight) +
                   " cp.async copies not waited for (cp.async.wait_group 0 "
                   "missing)";
  t.groups.clear();
  t.pending.clear();
  t.state = State::Done;
  --block->live;
  if (block->barrierArrived != 0 && block->error.empty())
    block->error = where(t) + " exited while " +
                   std::to_string(block->barrierArrived) +
                   " threads wait at a barrier";
  Warp &warp = block->warps[t.linear / kWarpSize];
  if (warp.arrived != 0 && block->error.empty())
    block->error = where(t) + " exited while its warp waits at " +
                   std::string(warp.op);
  // Back to the scheduler, for good.
  yieldToScheduler();
  __builtin_unreachable();
}

/// Runs one block to its end; false with block->error on failure.
bool runBlock() {
  Block &b = *block;
  unsigned count = b.dim.count();
  while (stacks.size() < count) {
    void *stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED) {
      b.error = "cannot map the stacks of " + std::to_string(count) +
                " threads";
      return false;
    }
    stacks.push_back(stack);
  }
  b.threads.assign(count, Thread());
  b.warps.assign((count + kWarpSize - 1) / kWarpSize, Warp());
  for (unsigned w = 0; w < b.warps.size(); ++w)
    b.warps[w].size = std::min(kWarpSize, count - w * kWarpSize);
  b.live = count;
  b.barrierArrived = 0;
  for (unsigned i = 0; i < count; ++i) {
    Thread &t = b.threads[i];
    t.linear = i;
    t.tid[0] = i % b.dim.x;
    t.tid[1] = (i / b.dim.x) % b.dim.y;
    t.tid[2] = i / (b.dim.x * b.dim.y);
    initContext(t.context, stacks[i], kStackBytes, threadMain);
  }
  while (true) {
    bool ran = false;
    for (Thread &t : b.threads) {
      if (t.state != State::Runnable)
        continue;
      ran = true;
      current = &t;
      switchContext(b.scheduler, t.context);
      current = nullptr;
      if (!b.error.empty())
        return false;
    }
    if (b.live == 0)
      return true;
    if (!ran) {
      unsigned atBarrier = 0, atWarp = 0;
      for (const Thread &t : b.threads) {
        atBarrier += t.state == State::AtBarrier;
        atWarp += t.state == State::AtWarp;
      }
      b.error = "deadlock: " + std::to_string(atBarrier) +
                " threads at a barrier, " + std::to_string(atWarp) +
                " at warp instructions, " + std::to_string(b.live) +
                " not finished";
      return false;
    }
  }
}

/// Waits until every lane of the running thread's warp arrived at `op`.
void warpSync(Warp &warp, const char *op) {
  Thread &t = *current;
  if (warp.arrived == 0)
    warp.op = op;
  else if (std::strcmp(warp.op, op) != 0)
    fail("lanes of warp " + std::to_string(t.linear / kWarpSize) + " at " +
         warp.op + " and " + op);
  if (++warp.arrived == warp.size) {
    warp.arrived = 0;
    unsigned first = (t.linear / kWarpSize) * kWarpSize;
    for (unsigned i = first; i < first + warp.size; ++i)
      if (block->threads[i].state == State::AtWarp)
        block->threads[i].state = State::Runnable;
    return;
  }
  t.state = State::AtWarp;
  yieldToScheduler();
}

} // namespace

bool vmoe::emu::runGrid(vmoe_emu_kernel_entry entry, void **params,
                        Dim3 grid, Dim3 dim,
                        const std::vector<SharedVariable> &shared,
                        std::string &error) {
  Block b;
  b.entry = entry;
  b.params = params;
  b.dim = dim;
  b.grid = grid;
  block = &b;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        b.id = {x, y, z};
        b.error.clear();
        // Shared memory starts undefined: NaN bytes, so that a read before
        // the block wrote it shows.
        for (const SharedVariable &v : shared)
          std::memset(v.address, 0xff, v.bytes);
        if (!runBlock()) {
          error = "block (" + std::to_string(x) + ", " + std::to_string(y) +
                  ", " + std::to_string(z) + "): " + b.error;
          block = nullptr;
          return false;
        }
      }
    }
  }
  block = nullptr;
  return true;
}

int32_t vmoe::emu::specialRegister(int32_t which) {
  if (!block || !current)
    return 0;
  const Thread &t = *current;
  switch (which) {
  case VMOE_EMU_TID_X: return static_cast<int32_t>(t.tid[0]);
  case VMOE_EMU_TID_Y: return static_cast<int32_t>(t.tid[1]);
  case VMOE_EMU_TID_Z: return static_cast<int32_t>(t.tid[2]);
  case VMOE_EMU_NTID_X: return static_cast<int32_t>(block->dim.x);
  case VMOE_EMU_NTID_Y: return static_cast<int32_t>(block->dim.y);
  case VMOE_EMU_NTID_Z: return static_cast<int32_t>(block->dim.z);
  case VMOE_EMU_CTAID_X: return static_cast<int32_t>(block->id.x);
  case VMOE_EMU_CTAID_Y: return static_cast<int32_t>(block->id.y);
  case VMOE_EMU_CTAID_Z: return static_cast<int32_t>(block->id.z);
  case VMOE_EMU_NCTAID_X: return static_cast<int32_t>(block->grid.x);
  case VMOE_EMU_NCTAID_Y: return static_cast<int32_t>(block->grid.y);
  case VMOE_EMU_NCTAID_Z: return static_cast<int32_t>(block->grid.z);
  case VMOE_EMU_LANEID: return static_cast<int32_t>(t.linear % kWarpSize);
  case VMOE_EMU_WARPSIZE: return kWarpSize;
  default: fail("unknown special register " + std::to_string(which));
  }
}

void vmoe::emu::blockBarrier() {
  Block &b = *block;
  if (b.live != b.threads.size())
    fail(where(*current) + " reached a barrier after " +
         std::to_string(b.threads.size() - b.live) + " threads exited");
  if (++b.barrierArrived == b.live) {
    b.barrierArrived = 0;
    for (Thread &t : b.threads)
      if (t.state == State::AtBarrier)
        t.state = State::Runnable;
    return;
  }
  current->state = State::AtBarrier;
  yieldToScheduler();
}

void vmoe::emu::warpCollective(
    const char *op, bool fullWarp, const LaneData &mine,
    const std::function<void(const LaneData *, unsigned, unsigned)>
        &compute) {
  Thread &t = *current;
  Warp &warp = block->warps[t.linear / kWarpSize];
  if (fullWarp && warp.size != kWarpSize)
    fail(std::string(op) + " in a warp of " + std::to_string(warp.size) +
         " threads (it needs 32)");
  unsigned lane = t.linear % kWarpSize;
  warp.lanes[lane] = mine;
  warpSync(warp, op);
  compute(warp.lanes, warp.size, lane);
  warpSync(warp, op);
}

void vmoe::emu::asyncCopy(void *destination, const void *source,
                          int32_t size, int32_t sourceSize) {
  if (size != 4 && size != 8 && size != 16)
    fail("cp.async of " + std::to_string(size) + " bytes");
  if (sourceSize < 0 || sourceSize > size)
    fail("cp.async reads " + std::to_string(sourceSize) + " of " +
         std::to_string(size) + " bytes");
  if (reinterpret_cast<uintptr_t>(destination) % size != 0 ||
      (sourceSize > 0 && reinterpret_cast<uintptr_t>(source) % size != 0))
    fail("cp.async of " + std::to_string(size) +
         " bytes from or to a misaligned address");
  current->pending.push_back({destination, source, size, sourceSize});
}

void vmoe::emu::asyncCommit() {
  current->groups.push_back(std::move(current->pending));
  current->pending.clear();
}

void vmoe::emu::asyncWait(int32_t pending) {
  std::deque<std::vector<AsyncCopy>> &groups = current->groups;
  while (groups.size() > static_cast<size_t>(pending < 0 ? 0 : pending)) {
    for (const AsyncCopy &copy : groups.front())
      copy.perform();
    groups.pop_front();
  }
}

void vmoe::emu::fail(const std::string &message) {
  if (block->error.empty())
    block->error = (current ? where(*current) + ": " : std::string()) +
                   message;
  current->state = State::Failed;
  yieldToScheduler();
  __builtin_unreachable();
}
