//===- BF16PairContraction.h - Contractions of bf16 pair panels -*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// A dense layer whose kernel is stored as bf16 pair panels
// (vmoe.unpack_panels {storage = bf16_pairs}, `--precision=bf16`) is a
// linalg.generic contraction that reads the panels in place: its B operand
// is the f32 panel tensor through the map `(..., n floordiv L, k floordiv 2,
// n mod L)` (PanelLayout.h), and its body says what the microkernel
// computes, exactly:
//
//   acc + extf(truncf(a) : bf16) * half(word, k)
//
// where half(word, k) is the f32 value of the bf16 in the low (k even) or
// high (k odd) 16 bits of the pair word, k = linalg.index of the reduction
// dim. The A rows are rounded to bf16 (nearest even) and every product is
// exact in f32. An A already stored as bf16 (the hidden of a dense MLP,
// rounded by the first GEMM's epilogue) is only widened:
//
//   acc + extf(a : bf16) * half(word, k)
//
// convert-vmoe-to-scf builds such bodies;
// vmoe-vectorize-contractions recognizes them and streams the pair panels
// in place (BF16Pairs.h), and any it leaves computes the same values
// through convert-linalg-to-loops.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_CODEGEN_BF16PAIRCONTRACTION_H
#define VMOE_CODEGEN_BF16PAIRCONTRACTION_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

namespace mlir::vmoe {

/// The f32 value of the bf16 in the high (`odd`, i1) or low half of the
/// pair word whose bits `word` (f32) holds.
Value widenPairHalf(OpBuilder &b, Location loc, Value word, Value odd);

/// Builds the body (linalg.yield included) of a bf16 pair contraction over
/// the block arguments `a` (f32, or bf16), `word` (f32 pair word) and
/// `acc`, the reduction being loop dim `kDim`.
void buildBF16PairContractionBody(OpBuilder &b, Location loc, Value a,
                                  Value word, Value acc, unsigned kDim);

/// Whether the body of `op` is one buildBF16PairContractionBody built with
/// input `aInput` as a, input `wordInput` as the pair word, the init as
/// acc and reduction dim `kDim`.
bool isBF16PairContractionBody(linalg::GenericOp op, unsigned aInput,
                               unsigned wordInput, unsigned kDim);

/// Builds the body (linalg.yield included) of a contraction of two f32
/// operands both rounded to bf16, over the block arguments (a, b, acc):
///
///   acc + extf(truncf(a) : bf16) * extf(truncf(b) : bf16)
///
/// (attention's q kᵀ and p v with --precision=bf16: neither operand is a
/// stored kernel). vmoe-vectorize-contractions rounds A's rows and packs B
/// (contiguous along its columns or along k) into bf16 pair panels per
/// call, then runs the pair microkernel.
void buildBF16RoundedContractionBody(OpBuilder &b, Location loc,
                                     ValueRange args);

/// Whether the body of `op` (two inputs, one init) is one
/// buildBF16RoundedContractionBody built (either input first).
bool isBF16RoundedContractionBody(linalg::GenericOp op);

} // namespace mlir::vmoe

#endif // VMOE_CODEGEN_BF16PAIRCONTRACTION_H
