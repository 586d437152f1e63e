//===- BF16KernelChoice.h - bf16 or f32 kernels for a CPU -------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Whether `--precision=bf16` pays on a CPU. bf16 weight panels halve the
// bytes a GEMM streams, but each product is a widening dot product (or, with
// no AVX512_BF16, two shifts and an fma): they beat f32 only where the CPU
// multiplies bf16 pairs faster than f32 (Zen 4: vdpbf16ps does 64 flops a
// cycle, vfmadd231ps 32), not where both run at the same rate (Cooper Lake)
// or where the shifts cost more than the bytes save (AVX2).
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_TARGET_BF16KERNELCHOICE_H
#define VMOE_TARGET_BF16KERNELCHOICE_H

#include <optional>
#include <string>

namespace llvm {
class MCSubtargetInfo;
} // namespace llvm

namespace mlir::vmoe {

/// What the compiler does with `--precision=bf16`.
struct BF16KernelChoice {
  bool bf16 = true;   // bf16 panels and products; false: f32 kernels
  bool dot = false;   // vdpbf16ps products (else shift + fma)
  std::string reason; // one clause: why, with the measured speedup if any
};

/// The kernels for `--precision=bf16` on the CPU `cpu` with `lanes`-wide f32
/// vectors. `onHost`: the code runs on this machine (-mcpu native, no
/// -mattr), so the products' speed is measured here (a few milliseconds)
/// unless `speedup` gives it; `always`: bf16 kernels whatever the speed.
BF16KernelChoice chooseBF16Kernels(const llvm::MCSubtargetInfo &cpu,
                                   unsigned lanes, bool onHost, bool always,
                                   std::optional<double> speedup);

/// This machine's bf16 dot product throughput over its f32 fma throughput
/// (flops per second each, `lanes`-wide vectors); nullopt where it has no
/// AVX512_BF16 (or no AVX512VL for 8 lanes) or is not x86-64.
std::optional<double> measureBF16DotSpeedup(unsigned lanes);

} // namespace mlir::vmoe

#endif // VMOE_TARGET_BF16KERNELCHOICE_H
