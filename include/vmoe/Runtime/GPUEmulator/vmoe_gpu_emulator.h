/*===- vmoe_gpu_emulator.h - ABI of emulated GPU kernels ----------*- C -*-===*\
|*                                                                            *|
|* Part of the vmoe project, under the Apache License v2.0 with LLVM          *|
|* Exceptions.                                                                *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* The GPU emulator runs the kernels of a model compiled with               *|
|* vmoe-lower-to-nvvm{format=emulator} on the host CPU: the pass            *|
|* vmoe-gpu-emulate-kernels compiles each kernel for the host, replacing     *|
|* NVVM's special registers, barriers and warp-level instructions by calls   *|
|* of the functions below, and registers the kernels from a global           *|
|* constructor; libvmoe_gpu_emulator.so implements these functions and the   *|
|* CUDA driver API the vmoe CUDA runtime loads ($VMOE_CUDA_DRIVER), running  *|
|* every thread of a block as a fiber (docs/GPU.md, "The emulator").         *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef VMOE_RUNTIME_GPUEMULATOR_VMOE_GPU_EMULATOR_H
#define VMOE_RUNTIME_GPUEMULATOR_VMOE_GPU_EMULATOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The object string of an emulated gpu.binary: this prefix, then the token
   the kernels of that module were registered under. */
#define VMOE_EMU_BINARY_PREFIX "vmoe-emu:"

/* The entry of an emulated kernel: one pointer per kernel argument, as
   cuLaunchKernel's kernelParams. */
typedef void (*vmoe_emu_kernel_entry)(void **params);

/* Registration (global constructors of the compiled object). */
void __vmoe_emu_register_kernel(const char *token, const char *name,
                                vmoe_emu_kernel_entry entry);
/* A shared-memory variable of the module: filled with 0xff bytes (NaN for
   floats) before every block, as shared memory starts undefined. */
void __vmoe_emu_register_shared(const char *token, void *address,
                                uint64_t bytes);

/* Special registers (nvvm.read.ptx.sreg.*). */
enum vmoe_emu_sreg {
  VMOE_EMU_TID_X = 0, VMOE_EMU_TID_Y, VMOE_EMU_TID_Z,
  VMOE_EMU_NTID_X, VMOE_EMU_NTID_Y, VMOE_EMU_NTID_Z,
  VMOE_EMU_CTAID_X, VMOE_EMU_CTAID_Y, VMOE_EMU_CTAID_Z,
  VMOE_EMU_NCTAID_X, VMOE_EMU_NCTAID_Y, VMOE_EMU_NCTAID_Z,
  VMOE_EMU_LANEID, VMOE_EMU_WARPSIZE
};
int32_t __vmoe_emu_sreg(int32_t which);

/* bar.sync 0 over the whole block. */
void __vmoe_emu_barrier(void);

/* mma.sync.aligned.row.col with f32 accumulators, per lane: a and b hold
   the lane's 32-bit operand registers, c and d its 4 accumulators. */
enum vmoe_emu_mma {
  VMOE_EMU_MMA_M16N8K8_TF32 = 0, /* a: 4 regs, b: 2 regs */
  VMOE_EMU_MMA_M16N8K16_BF16 = 1, /* a: 4 regs of bf16 pairs, b: 2 */
  VMOE_EMU_MMA_M16N8K16_F16 = 2 /* a: 4 regs of f16 pairs, b: 2 */
};
void __vmoe_emu_mma(int32_t kind, const uint32_t *a, const uint32_t *b,
                    const float *c, float *d);

/* ldmatrix.sync.aligned.m8n8.x{num}{.trans}.b16: `address` is this lane's
   row; `out` gets `num` registers. */
void __vmoe_emu_ldmatrix(int32_t num, int32_t trans, const void *address,
                         uint32_t *out);

/* cp.async of `size` bytes, of which the first `source_size` are read and
   the rest zero-filled; completed by a later wait_group. */
void __vmoe_emu_cp_async(void *destination, const void *source, int32_t size,
                         int32_t source_size);
void __vmoe_emu_cp_async_commit(void);
void __vmoe_emu_cp_async_wait(int32_t pending);

/* shfl.sync: kind 0 bfly, 1 up, 2 down, 3 idx (NVVM's ShflKind); `valid`
   gets whether the source lane was in range. */
uint32_t __vmoe_emu_shfl(int32_t kind, uint32_t mask, uint32_t value,
                         int32_t lane_or_offset, int32_t clamp,
                         uint8_t *valid);

/* vote.sync: kind 0 any, 1 all, 2 ballot, 3 uni (NVVM's VoteSyncKind). */
uint32_t __vmoe_emu_vote(int32_t kind, uint32_t mask, int32_t predicate);

#ifdef __cplusplus
}
#endif

#endif /* VMOE_RUNTIME_GPUEMULATOR_VMOE_GPU_EMULATOR_H */
