//===- Microkernel.cpp - Register-blocked GEMM code generation --*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Codegen/Microkernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::vmoe;

Value mlir::vmoe::loadVector(OpBuilder &b, Location loc, VectorType type,
                             Value base, ValueRange indices, Value mask) {
  if (!mask)
    return vector::LoadOp::create(b, loc, type, base, indices);
  Value zero = arith::ConstantOp::create(
      b, loc, type, DenseElementsAttr::get(type, b.getFloatAttr(
                                                     type.getElementType(), 0)));
  return vector::MaskedLoadOp::create(b, loc, type, base, indices, mask, zero);
}

void mlir::vmoe::storeVector(OpBuilder &b, Location loc, Value value,
                             Value base, ValueRange indices, Value mask) {
  if (!mask) {
    vector::StoreOp::create(b, loc, value, base, indices);
    return;
  }
  vector::MaskedStoreOp::create(b, loc, base, indices, mask, value);
}

namespace {

/// Emits the row-tile loop of one column panel starting at `n0`; `masks`
/// holds one mask per vector (all null for a full panel).
struct PanelEmitter {
  const MicrokernelShape &shape;
  const GemmAccessors &access;
  Value m, k;

  void emit(OpBuilder &b, Location loc, Value n0, ArrayRef<Value> masks) {
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value tileRows = arith::ConstantIndexOp::create(b, loc, shape.rows);
    Value lastRow = arith::SubIOp::create(b, loc, m, one);
    scf::ForOp::create(
        b, loc, zero, m, tileRows, ValueRange{},
        [&](OpBuilder &b, Location loc, Value m0, ValueRange) {
          emitTile(b, loc, n0, m0, lastRow, masks);
          scf::YieldOp::create(b, loc);
        });
  }

  /// The column of vector `v` of the panel.
  Value column(OpBuilder &b, Location loc, Value n0, int64_t v) const {
    if (v == 0)
      return n0;
    return arith::AddIOp::create(
        b, loc, n0, arith::ConstantIndexOp::create(b, loc, v * shape.lanes));
  }

  void emitTile(OpBuilder &b, Location loc, Value n0, Value m0, Value lastRow,
                ArrayRef<Value> masks) {
    // Rows past the end are clamped to the last row for loads and skipped
    // for stores.
    SmallVector<Value> rows, valid;
    for (int64_t i = 0; i < shape.rows; ++i) {
      Value row = m0;
      if (i > 0)
        row = arith::AddIOp::create(b, loc, m0,
                                    arith::ConstantIndexOp::create(b, loc, i));
      valid.push_back(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle,
                                            row, lastRow));
      rows.push_back(arith::MinSIOp::create(b, loc, row, lastRow));
    }
    SmallVector<Value> columns;
    for (int64_t v = 0; v < shape.vectors; ++v)
      columns.push_back(column(b, loc, n0, v));
    SmallVector<Value> init;
    for (int64_t i = 0; i < shape.rows; ++i)
      for (int64_t v = 0; v < shape.vectors; ++v)
        init.push_back(access.initC(b, loc, rows[i], columns[v], masks[v]));
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    auto loop = scf::ForOp::create(
        b, loc, zero, k, one, init,
        [&](OpBuilder &b, Location loc, Value kk, ValueRange acc) {
          SmallVector<Value> bVectors;
          for (int64_t v = 0; v < shape.vectors; ++v)
            bVectors.push_back(access.loadB(b, loc, kk, columns[v], masks[v]));
          auto vectorType = cast<VectorType>(bVectors.front().getType());
          SmallVector<Value> next;
          for (int64_t i = 0; i < shape.rows; ++i) {
            Value a = access.loadA(b, loc, rows[i], kk);
            Value splat = vector::BroadcastOp::create(b, loc, vectorType, a);
            for (int64_t v = 0; v < shape.vectors; ++v)
              next.push_back(vector::FMAOp::create(
                  b, loc, splat, bVectors[v], acc[i * shape.vectors + v]));
          }
          scf::YieldOp::create(b, loc, next);
        });
    for (int64_t i = 0; i < shape.rows; ++i) {
      auto store = [&](OpBuilder &b, Location loc) {
        for (int64_t v = 0; v < shape.vectors; ++v)
          access.storeC(b, loc, rows[i], columns[v],
                        loop.getResult(i * shape.vectors + v), masks[v]);
      };
      if (i == 0) { // Row m0 always exists.
        store(b, loc);
        continue;
      }
      scf::IfOp::create(b, loc, valid[i], [&](OpBuilder &b, Location loc) {
        store(b, loc);
        scf::YieldOp::create(b, loc);
      });
    }
  }
};

} // namespace

void mlir::vmoe::emitGemm(OpBuilder &b, Location loc, Value m, Value n,
                          Value k, std::optional<int64_t> staticN,
                          const MicrokernelShape &shape,
                          const GemmAccessors &access, bool parallelPanels) {
  PanelEmitter panel{shape, access, m, k};
  int64_t width = shape.panelWidth();
  bool alwaysFull = staticN && *staticN % width == 0;
  auto body = [&](OpBuilder &b, Location loc, Value n0) {
    SmallVector<Value> noMasks(shape.vectors, Value());
    if (alwaysFull) {
      panel.emit(b, loc, n0, noMasks);
      return;
    }
    Value remaining = arith::SubIOp::create(b, loc, n, n0);
    Value full = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::sge, remaining,
        arith::ConstantIndexOp::create(b, loc, width));
    scf::IfOp::create(
        b, loc, full,
        [&](OpBuilder &b, Location loc) {
          panel.emit(b, loc, n0, noMasks);
          scf::YieldOp::create(b, loc);
        },
        [&](OpBuilder &b, Location loc) {
          auto maskType = VectorType::get({shape.lanes}, b.getI1Type());
          SmallVector<Value> masks;
          for (int64_t v = 0; v < shape.vectors; ++v) {
            Value left = arith::SubIOp::create(
                b, loc, remaining,
                arith::ConstantIndexOp::create(b, loc, v * shape.lanes));
            masks.push_back(
                vector::CreateMaskOp::create(b, loc, maskType, ValueRange{left}));
          }
          panel.emit(b, loc, n0, masks);
          scf::YieldOp::create(b, loc);
        });
  };
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value step = arith::ConstantIndexOp::create(b, loc, width);
  if (parallelPanels) {
    scf::ParallelOp::create(
        b, loc, ValueRange{zero}, ValueRange{n}, ValueRange{step},
        [&](OpBuilder &b, Location loc, ValueRange ivs) {
          body(b, loc, ivs[0]);
        });
    return;
  }
  scf::ForOp::create(b, loc, zero, n, step, ValueRange{},
                     [&](OpBuilder &b, Location loc, Value n0, ValueRange) {
                       body(b, loc, n0);
                       scf::YieldOp::create(b, loc);
                     });
}
