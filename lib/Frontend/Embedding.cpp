//===- Embedding.cpp - Patch, class and position embedding ------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Images -> tokens: patches (ph x pw, not necessarily square) cut in
// (c, i, j) order, the patch embedding, the class token (head `token`) and
// the position embedding.
//
//===----------------------------------------------------------------------===//

#include "ForwardBuilder.h"

#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::frontend;

using utils::IteratorType;

/// Images [N, C, H, W] -> patch rows [N*P, C*ph*pw], pixels in (c, i, j)
/// order within a patch, patches row-major over the grid.
Value ForwardBuilder::patchify(Value images) {
  int64_t n = batchImages(model, options), c = model.channels;
  int64_t ph = model.patchHeight, pw = model.patchWidth;
  int64_t hp = model.height / ph, wp = model.width / pw;
  Value grid = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({n, c, hp, ph, wp, pw}, f32), images,
      ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}, {4, 5}});
  Value init =
      emptyTensor(b, loc,
                  {b.getIndexAttr(n), b.getIndexAttr(hp), b.getIndexAttr(wp),
                   b.getIndexAttr(c), b.getIndexAttr(ph), b.getIndexAttr(pw)},
                  f32);
  Value moved = linalg::TransposeOp::create(b, loc, grid, init,
                                            ArrayRef<int64_t>{0, 2, 4, 1, 3, 5})
                    .getResult()[0];
  return tensor::CollapseShapeOp::create(
      b, loc, moved, ArrayRef<ReassociationIndices>{{0, 1, 2}, {3, 4, 5}});
}

/// Images [N, C, H, W] -> tokens [N*T, D].
Value ForwardBuilder::embed(Value images) {
  int64_t n = batchImages(model, options), p = model.numPatches();
  int64_t t = model.tokensPerImage(), d = model.modelWidth;
  MLIRContext *ctx = b.getContext();
  Value embedded = linear(patchify(images), "embedding");
  Value x = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({n, p, d}, f32), embedded,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  if (model.head == "token") {
    Value cls = tensor::CollapseShapeOp::create(
        b, loc, weight("cls_token"), ArrayRef<ReassociationIndices>{{0, 1}});
    Value clsInit = emptyTensor(
        b, loc, {b.getIndexAttr(n), b.getIndexAttr(1), b.getIndexAttr(d)}, f32);
    Value clsRows =
        linalg::GenericOp::create(
            b, loc, clsInit.getType(), ValueRange{cls}, ValueRange{clsInit},
            {projectionMap(ctx, 3, {2}), b.getMultiDimIdentityMap(3)},
            SmallVector<IteratorType>(3, IteratorType::parallel),
            [](OpBuilder &b, Location loc, ValueRange args) {
              linalg::YieldOp::create(b, loc, ValueRange{args[0]});
            })
            .getResult(0);
    Value all = emptyTensor(
        b, loc, {b.getIndexAttr(n), b.getIndexAttr(t), b.getIndexAttr(d)}, f32);
    auto at = [&](int64_t token, int64_t count) {
      return std::make_pair(
          SmallVector<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(token),
                                    b.getIndexAttr(0)},
          SmallVector<OpFoldResult>{b.getIndexAttr(n), b.getIndexAttr(count),
                                    b.getIndexAttr(d)});
    };
    auto [clsOffsets, clsSizes] = at(0, 1);
    all = tensor::InsertSliceOp::create(b, loc, clsRows, all, clsOffsets,
                                        clsSizes, unitStrides(b, 3));
    auto [patchOffsets, patchSizes] = at(1, p);
    x = tensor::InsertSliceOp::create(b, loc, x, all, patchOffsets, patchSizes,
                                      unitStrides(b, 3));
  }
  // + pos_embedding [T, D], broadcast over images.
  Value pos = weight("pos_embedding");
  x = linalg::GenericOp::create(
          b, loc, x.getType(), ValueRange{pos}, ValueRange{x},
          {projectionMap(ctx, 3, {1, 2}), b.getMultiDimIdentityMap(3)},
          SmallVector<IteratorType>(3, IteratorType::parallel),
          [](OpBuilder &b, Location loc, ValueRange args) {
            linalg::YieldOp::create(
                b, loc,
                ValueRange{arith::AddFOp::create(b, loc, args[1], args[0])});
          })
          .getResult(0);
  x = tensor::CollapseShapeOp::create(
      b, loc, x, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  return x;
}
