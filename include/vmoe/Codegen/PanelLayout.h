//===- PanelLayout.h - Weights stored as GEMM column panels -----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The panel layout of vmoe.unpack_panels: a `... x K x N` matrix stored as
// `... x ceil(N/L) x K x L`, `panels[..., n floordiv L, k, n mod L]` the
// plain `w[..., k, n]`. Constant weights are stored this way once, at model
// load (docs/ModelFormat.md §5), and the microkernel streams them in place.
// A linalg.generic reads such an operand through an indexing map whose
// results end in `(n floordiv L, k, n mod L)` (the panel map of its plain
// `(..., k, n)` map); these helpers build and recognize that map and load
// B vectors from the panels.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_CODEGEN_PANELLAYOUT_H
#define VMOE_CODEGEN_PANELLAYOUT_H

#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir::vmoe {

/// The map reading a plain `(..., k, n)` operand from its panels of width
/// `width`: `(..., n floordiv width, k, n mod width)`. `plain` has at least
/// two results.
AffineMap getPanelOperandMap(AffineMap plain, int64_t width);

/// The map reading a plain `(..., k, n)` operand from its bf16 pair panels
/// of width `width` (vmoe.unpack_panels {storage = bf16_pairs}: one 32-bit
/// word per two consecutive k): `(..., n floordiv width, k floordiv 2,
/// n mod width)`.
AffineMap getPairPanelOperandMap(AffineMap plain, int64_t width);

/// A panel map recognized by matchPanelOperandMap.
struct PanelOperandMap {
  AffineMap plain; ///< The map of the plain operand, `(..., k, n)`.
  int64_t width;   ///< The panel width L.
  bool pairs;      ///< bf16 pair panels (k floordiv 2), else f32 panels.
};

/// The plain map and panel width of a map built by getPanelOperandMap or
/// getPairPanelOperandMap whose k and n are loop dims (nullopt for any
/// other map).
std::optional<PanelOperandMap> matchPanelOperandMap(AffineMap map);

/// B[lead..., k, n .. n + lanes) from the panels `panels` [lead..., P, K, L]
/// (`lead` the indices of the leading dims), a full vector of `type`; n is a
/// multiple of the lanes and L of the lanes, so the vector lies in one
/// panel. Columns past the last panel, which no store keeps, read the last
/// panel instead of past the buffer.
Value loadPanelVector(OpBuilder &b, Location loc, VectorType type,
                      Value panels, ValueRange lead, Value k, Value n);

/// memref.prefetch (read, into L2) of the cache line loadPanelVector would
/// read for B[lead..., k, n ..).
void prefetchPanelVector(OpBuilder &b, Location loc, Value panels,
                         ValueRange lead, Value k, Value n);

/// The pair words of k pair `pair` of columns [n, n + lanes) from bf16 pair
/// panels `panels` [lead..., P, ceil(K/2), L] of f32 words (weights packed
/// at load: bitcast) or i32 words (packed per call), as vector<lanes x i32>
/// (loadPanelVector).
Value loadPairPanelWords(OpBuilder &b, Location loc, int64_t lanes,
                         Value panels, ValueRange lead, Value pair, Value n);

} // namespace mlir::vmoe

#endif // VMOE_CODEGEN_PANELLAYOUT_H
