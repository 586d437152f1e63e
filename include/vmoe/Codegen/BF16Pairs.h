//===- BF16Pairs.h - bf16 pair products of the CPU microkernel --*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// bf16 weights travel as pairs: one 32-bit word holds the bf16 values of
// two consecutive k (k even in the low half), the operand layout of x86's
// `vdpbf16ps`. These helpers form `acc += a[2j] * b[2j] + a[2j+1] * b[2j+1]`
// per f32 lane, either with `x86vector.avx512.dot` (targets with
// AVX512_BF16) or, anywhere else, by widening each bf16 to f32 with a 16-bit
// shift (or a mask) and two f32 fmas. Every bf16 x bf16 product is exact in
// f32, so both accumulate exact products in f32.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_CODEGEN_BF16PAIRS_H
#define VMOE_CODEGEN_BF16PAIRS_H

#include "mlir/IR/Builders.h"

namespace mlir::vmoe {

/// Emits the products of bf16 pairs into f32 accumulators of `lanes` lanes.
struct BF16PairProducts {
  /// x86vector.avx512.dot (vdpbf16ps) instead of shift + fma.
  bool dot = false;
  int64_t lanes = 8;

  /// vector<2 x lanes x f32> rounded to bf16 (nearest even, NaN kept) and
  /// packed into vector<lanes x i32> pair words (element 2i in the low
  /// half of word i). With `dot` an f32 -> bf16 truncation (LLVM emits two
  /// vcvtneps2bf16 and a vinsertf64x4 on AVX512_BF16; the one-instruction
  /// vcvtne2ps2bf16 measured no faster); else integer arithmetic on the
  /// f32 bits, so that targets without bf16 instructions need no runtime
  /// library call.
  Value roundToPairs(OpBuilder &b, Location loc, Value values) const;
  /// `values` (vector<2 x lanes>) as lanes pair words: f32 rounded
  /// (roundToPairs), bf16 (already rounded) bitcast as they are.
  Value valuesToPairs(OpBuilder &b, Location loc, Value values) const;
  /// The 2 x lanes values of `source` (f32 or bf16) from `indices` on
  /// (contiguous; lanes past `mask` read 0) as lanes pair words.
  Value loadPairWords(OpBuilder &b, Location loc, Value source,
                      ValueRange indices, Value mask) const;
  /// Rounds rows [0, rows) of an f32 matrix to pairs: row r of `pairs`
  /// (memref<R x ceil(k/2) x i32>, R >= rows) becomes
  /// source[prefix(r)..., 0 .. k) as pair words, the high half 0 past an
  /// odd k. 2 x lanes values (lanes words) per step, masked past k; the
  /// source rows are contiguous along k. A bf16 source (already rounded)
  /// is copied word for word.
  void roundRowsToPairs(
      OpBuilder &b, Location loc, Value pairs, Value rows, Value k,
      Value source,
      function_ref<SmallVector<Value>(OpBuilder &, Location, Value)> prefix)
      const;
  /// B [K, N] (static) rounded to `panels` pair panels [panels,
  /// ceil(K/2), lanes] of i32, a new memref.alloca: word (p, j, i) holds
  /// bf16(B[2j, p lanes + i]) low and bf16(B[2j + 1, p lanes + i]) high, 0
  /// past K and N (a bf16 `source` taken as it is). `indices(k, n)` are
  /// the indices of B[k, n] in `source`,
  /// whose elements are contiguous along n, or along k with `transposed`
  /// (then the words of `lanes` columns, a lanes x lanes tile, are
  /// transposed in registers).
  Value packPanels(
      OpBuilder &b, Location loc, Value source, int64_t panels, int64_t k,
      int64_t n, bool transposed,
      function_ref<SmallVector<Value>(OpBuilder &, Location, Value, Value)>
          indices) const;
  /// The operands one vector of pairs (vector<lanes x i32>) of B gives:
  /// the bf16 vector for the dot, else its even and odd k as f32 vectors.
  SmallVector<Value, 2> prepareB(OpBuilder &b, Location loc, Value pairs) const;
  /// The operands one pair (i32) of A gives, broadcast to all lanes.
  SmallVector<Value, 2> prepareA(OpBuilder &b, Location loc, Value pair) const;
  /// (acc + a[odd] * b[odd]) + a[even] * b[even], per lane: the order of
  /// vdpbf16ps, so both forms give the same sums (but for its flushing of
  /// denormals).
  Value update(OpBuilder &b, Location loc, Value acc, ArrayRef<Value> a,
               ArrayRef<Value> bOperands) const;
};

} // namespace mlir::vmoe

#endif // VMOE_CODEGEN_BF16PAIRS_H
