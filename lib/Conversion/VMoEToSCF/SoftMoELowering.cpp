//===- SoftMoELowering.cpp - Lower soft_moe ---------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe.soft_moe -> three scf.forall loops around microkernel GEMMs, with
// J = E * P slots (phi read as D x J):
//
// 1. per group g: the logits L[g] (S x J) = xn . phin, with the two
//    normalizations (and the scale) applied while loading the GEMM operands;
//    per slot the max and the sum of exp over tokens; then the dispatch GEMM
//    slot_in^T (D x J) = x^T . W, where W[m, j] = exp(L[m, j] - max_j) /
//    sum_j is computed while packing W (once per element), never stored;
//    slot_in goes to its expert's rows.
// 2. per expert e: the expert MLP on its G * P slot rows (two GEMMs).
// 3. per group g: per token the max and the sum of exp over the J slots;
//    then the combine GEMM out^T (D x S) = slot_out^T . V, where V[j, m] =
//    exp(L[m, j] - max_m) / sum_m is again computed while packing.
//
// L is the only S x J tensor, written once by its GEMM (accumulating in
// place over blocks of 256 of D) and read by phases 1 and 3. Every loop
// iteration writes its own rows, so results do not depend on the schedule.
// The GEMMs pack B block by block into one scratch per loop iteration on
// the stack of the running thread (no heap allocation per group or
// expert); with `weight_panels` the expert GEMMs read w1 and w2 from their
// panels in place (packed once, at model load).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "Patterns.h"

#include "vmoe/Codegen/Microkernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::lowering;

/// The epsilon of the L2 normalizations (SPEC §8).
static constexpr double kNormEpsilon = 1e-6;

/// A 64-byte aligned memref.alloc of `shape` (f32), dynamic dims from
/// `dynamicSizes` in order.
static Value allocF32(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                      ValueRange dynamicSizes) {
  return memref::AllocOp::create(b, loc,
                                 MemRefType::get(shape, b.getF32Type()),
                                 dynamicSizes, b.getI64IntegerAttr(64));
}

/// 1 / sqrt(sum + 1e-6).
static Value inverseNorm(OpBuilder &b, Location loc, Value sumOfSquares) {
  Type f32 = b.getF32Type();
  Value root = math::SqrtOp::create(
      b, loc,
      arith::AddFOp::create(b, loc, sumOfSquares,
                            floatConst(b, loc, f32, kNormEpsilon)));
  return arith::DivFOp::create(b, loc, floatConst(b, loc, f32, 1.0), root);
}

/// Max and sum of exp(v - max) over i in [0, n) of `load(i)`, into
/// maxOut[at] and sumOut[at] (the softmax statistics of one row or column).
static void softmaxStatistics(
    OpBuilder &b, Location loc, Value n,
    function_ref<Value(OpBuilder &, Location, Value)> load, Value maxOut,
    Value sumOut, Value at) {
  Type f32 = b.getF32Type();
  double inf = std::numeric_limits<double>::infinity();
  Value max = buildLoop(b, loc, n, {floatConst(b, loc, f32, -inf)},
                        [&](OpBuilder &b, Location loc, Value i,
                            ValueRange acc) -> SmallVector<Value> {
                          return {arith::MaximumFOp::create(
                              b, loc, acc[0], load(b, loc, i))};
                        })[0];
  Value sum = buildLoop(
      b, loc, n, {floatConst(b, loc, f32, 0)},
      [&](OpBuilder &b, Location loc, Value i,
          ValueRange acc) -> SmallVector<Value> {
        Value e = math::ExpOp::create(
            b, loc, arith::SubFOp::create(b, loc, load(b, loc, i), max));
        return {arith::AddFOp::create(b, loc, acc[0], e)};
      })[0];
  memref::StoreOp::create(b, loc, max, maxOut, ValueRange{at});
  memref::StoreOp::create(b, loc, sum, sumOut, ValueRange{at});
}

/// exp(v - max) / sum lane by lane, lanes outside `mask` set to 0.
static Value softmaxWeights(OpBuilder &b, Location loc, Value v, Value max,
                            Value sum, Value mask) {
  Value w = arith::DivFOp::create(
      b, loc,
      math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, v, max)),
      sum);
  if (!mask)
    return w;
  return arith::SelectOp::create(b, loc, mask, w,
                                 floatConst(b, loc, w.getType(), 0));
}

/// for i in [0, n): body(i).
static void forEach(OpBuilder &b, Location loc, Value n,
                    function_ref<void(OpBuilder &, Location, Value)> body) {
  buildLoop(b, loc, n, {},
            [&](OpBuilder &b, Location loc, Value i,
                ValueRange) -> SmallVector<Value> {
              body(b, loc, i);
              return {};
            });
}

/// An scf.forall over [0, n) without shared outputs.
static void forallIndex(OpBuilder &b, Location loc, Value n,
                        function_ref<void(OpBuilder &, Location, Value)> body) {
  scf::ForallOp::create(b, loc, ArrayRef<OpFoldResult>{n}, ValueRange{},
                        std::nullopt,
                        [&](OpBuilder &b, Location loc, ValueRange ivs) {
                          body(b, loc, ivs[0]);
                          scf::InParallelOp::create(b, loc);
                        });
}

namespace {

/// vmoe.soft_moe -> logits and dispatch per group, experts per expert,
/// combine per group.
struct SoftMoEOpLowering : OpConversionPattern<SoftMoEOp> {
  SoftMoEOpLowering(MLIRContext *context, MicrokernelShape shape)
      : OpConversionPattern(context), shape(shape) {}

  LogicalResult
  matchAndRewrite(SoftMoEOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto xType = op.getX().getType();
    if (!xType.getElementType().isF32())
      return rewriter.notifyMatchFailure(op, "only f32 is lowered");
    FailureOr<std::optional<int64_t>> panelWidth =
        expertPanelWidth(op, op.getWeightPanels(), shape);
    if (failed(panelWidth))
      return failure();
    Type f32 = b.getF32Type();
    auto vectorType = VectorType::get({shape.lanes}, f32);

    // phi [D, E, P] read as [D, J].
    auto phiType = op.getPhi().getType();
    int64_t staticJ = ShapedType::isDynamic(phiType.getDimSize(1)) ||
                              ShapedType::isDynamic(phiType.getDimSize(2))
                          ? ShapedType::kDynamic
                          : phiType.getDimSize(1) * phiType.getDimSize(2);
    Value phiMatrix = tensor::CollapseShapeOp::create(
        b, loc, RankedTensorType::get({phiType.getDimSize(0), staticJ}, f32),
        adaptor.getPhi(), ArrayRef<ReassociationIndices>{{0}, {1, 2}});
    Value x = readOnlyBuffer(b, loc, adaptor.getX());
    Value phi = readOnlyBuffer(b, loc, phiMatrix);
    Value scaleBuffer = readOnlyBuffer(b, loc, adaptor.getScale());
    Value w1 = readOnlyBuffer(b, loc, adaptor.getW1());
    Value b1 = readOnlyBuffer(b, loc, adaptor.getB1());
    Value w2 = readOnlyBuffer(b, loc, adaptor.getW2());
    Value b2 = readOnlyBuffer(b, loc, adaptor.getB2());
    auto dim = [&](Value memref, int64_t i) {
      return getValueOrCreateConstantIndexOp(
          b, loc, memref::getMixedSize(b, loc, memref, i));
    };
    Value g = dim(x, 0), s = dim(x, 1), d = dim(x, 2), j = dim(phi, 1);
    Value e = tensor::DimOp::create(b, loc, adaptor.getPhi(), 1);
    Value p = tensor::DimOp::create(b, loc, adaptor.getPhi(), 2);
    // H from b1: w1 may be in panel layout.
    Value h = dim(b1, 1);
    Value rowsPerExpert = arith::MulIOp::create(b, loc, g, p);
    std::optional<int64_t> staticD = staticDim(xType, 2);
    std::optional<int64_t> staticH = staticDim(op.getB1().getType(), 1);
    std::optional<int64_t> staticS = staticDim(xType, 1);
    std::optional<int64_t> staticSlots;
    if (!ShapedType::isDynamic(staticJ))
      staticSlots = staticJ;

    // The scale multiplies xn when it has fewer elements than phin.
    Value scale = memref::LoadOp::create(b, loc, scaleBuffer, ValueRange{});
    Value scaleTokens = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::slt,
        arith::MulIOp::create(b, loc, arith::MulIOp::create(b, loc, g, s), d),
        arith::MulIOp::create(b, loc, d, j));
    Value scaleSlots = arith::XOrIOp::create(
        b, loc, scaleTokens,
        arith::ConstantIntOp::create(b, loc, 1, 1));

    // phiInv[j] = 1 / |phi[:, j]|, once per call.
    Value phiInv = allocF32(b, loc, {ShapedType::kDynamic}, {j});
    forEach(b, loc, j, [&](OpBuilder &b, Location loc, Value col) {
      Value sum = buildLoop(b, loc, d, {floatConst(b, loc, f32, 0)},
                            [&](OpBuilder &b, Location loc, Value dd,
                                ValueRange acc) -> SmallVector<Value> {
                              Value v = memref::LoadOp::create(
                                  b, loc, phi, ValueRange{dd, col});
                              return {arith::AddFOp::create(
                                  b, loc, acc[0],
                                  arith::MulFOp::create(b, loc, v, v))};
                            })[0];
      memref::StoreOp::create(b, loc, inverseNorm(b, loc, sum), phiInv,
                              ValueRange{col});
    });

    // The buffers shared between the phases.
    Value logits = allocF32(
        b, loc,
        {xType.getDimSize(0), xType.getDimSize(1), staticJ},
        dynamicSizes({{xType.getDimSize(0), g},
                      {xType.getDimSize(1), s},
                      {staticJ, j}}));
    int64_t dynamic = ShapedType::kDynamic;
    Value slotIn = allocF32(b, loc, {dynamic, dynamic, dynamic},
                            {e, rowsPerExpert, d});
    Value slotOut = allocF32(b, loc, {dynamic, dynamic, dynamic},
                             {e, rowsPerExpert, d});

    // Phase 1: logits, dispatch weights and slot inputs of each group.
    forallIndex(b, loc, g, [&](OpBuilder &b, Location loc, Value gr) {
      Value scratch = allocaBlockScratch(b, loc, shape);
      Value xInv = allocF32(b, loc, {dynamic}, {s});
      forEach(b, loc, s, [&](OpBuilder &b, Location loc, Value m) {
        Value sum = buildLoop(b, loc, d, {floatConst(b, loc, f32, 0)},
                              [&](OpBuilder &b, Location loc, Value dd,
                                  ValueRange acc) -> SmallVector<Value> {
                                Value v = memref::LoadOp::create(
                                    b, loc, x, ValueRange{gr, m, dd});
                                return {arith::AddFOp::create(
                                    b, loc, acc[0],
                                    arith::MulFOp::create(b, loc, v, v))};
                              })[0];
        memref::StoreOp::create(b, loc, inverseNorm(b, loc, sum), xInv,
                                ValueRange{m});
      });

      // L[g] = (x * xInv [* scale]) . (phi * phiInv [* scale]).
      GemmAccessors logitsGemm;
      setPlainOutput(logitsGemm, logits, {gr}, vectorType);
      logitsGemm.loadA = [&](OpBuilder &b, Location loc, Value m, Value kk) {
        Value v = memref::LoadOp::create(b, loc, x, ValueRange{gr, m, kk});
        Value inv = memref::LoadOp::create(b, loc, xInv, ValueRange{m});
        Value normed = arith::MulFOp::create(b, loc, v, inv);
        return Value(arith::SelectOp::create(
            b, loc, scaleTokens, arith::MulFOp::create(b, loc, normed, scale),
            normed));
      };
      logitsGemm.loadB = [&](OpBuilder &b, Location loc, Value kk, Value n,
                             Value mask) {
        Value v = loadVector(b, loc, vectorType, phi, {kk, n}, mask);
        Value inv = loadVector(b, loc, vectorType, phiInv, {n}, mask);
        Value normed = arith::MulFOp::create(b, loc, v, inv);
        Value scaled = arith::MulFOp::create(
            b, loc, normed,
            vector::BroadcastOp::create(b, loc, vectorType, scale));
        return Value(
            arith::SelectOp::create(b, loc, scaleSlots, scaled, normed));
      };
      emitGemm(b, loc, s, j, d, staticSlots, shape, logitsGemm, scratch,
               /*parallelThreads=*/Value());

      // The dispatch softmax runs over the valid tokens of the group:
      // sv = clamp(n - g * S, 0, S) (all S without a `valid` operand).
      Value sv = s;
      if (Value numValid = adaptor.getNumValid()) {
        Value rest = arith::SubIOp::create(
            b, loc, numValid, arith::MulIOp::create(b, loc, gr, s));
        sv = arith::MinSIOp::create(
            b, loc,
            arith::MaxSIOp::create(b, loc, rest, indexConst(b, loc, 0)), s);
      }

      // Softmax statistics over the tokens of each slot.
      Value colMax = allocF32(b, loc, {dynamic}, {j});
      Value colSum = allocF32(b, loc, {dynamic}, {j});
      forEach(b, loc, j, [&](OpBuilder &b, Location loc, Value col) {
        softmaxStatistics(
            b, loc, sv,
            [&](OpBuilder &b, Location loc, Value m) {
              return Value(memref::LoadOp::create(b, loc, logits,
                                                  ValueRange{gr, m, col}));
            },
            colMax, colSum, col);
      });

      // slot_in^T[d, j] = sum_m x[g, m, d] * softmax_m(L[g, m, j]).
      Value slotInT = allocF32(b, loc, {dynamic, dynamic}, {d, j});
      if (adaptor.getNumValid()) {
        // The GEMM writes nothing when sv = 0: start from zero slot inputs.
        forEach(b, loc, d, [&](OpBuilder &b, Location loc, Value dd) {
          forEach(b, loc, j, [&](OpBuilder &b, Location loc, Value col) {
            memref::StoreOp::create(b, loc, floatConst(b, loc, f32, 0),
                                    slotInT, ValueRange{dd, col});
          });
        });
      }
      GemmAccessors dispatch;
      setPlainOutput(dispatch, slotInT, {}, vectorType);
      dispatch.loadA = [&](OpBuilder &b, Location loc, Value dd, Value m) {
        return Value(
            memref::LoadOp::create(b, loc, x, ValueRange{gr, m, dd}));
      };
      dispatch.loadB = [&](OpBuilder &b, Location loc, Value m, Value n,
                           Value mask) {
        return softmaxWeights(
            b, loc, loadVector(b, loc, vectorType, logits, {gr, m, n}, mask),
            loadVector(b, loc, vectorType, colMax, {n}, mask),
            loadVector(b, loc, vectorType, colSum, {n}, mask), mask);
      };
      emitGemm(b, loc, d, j, sv, staticSlots, shape, dispatch, scratch,
               /*parallelThreads=*/Value());

      // Slot j = (e, p) of this group is row g * P + p of expert e.
      forEach(b, loc, j, [&](OpBuilder &b, Location loc, Value col) {
        Value ex = arith::DivUIOp::create(b, loc, col, p);
        Value row = arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, gr, p),
            arith::RemUIOp::create(b, loc, col, p));
        forEach(b, loc, d, [&](OpBuilder &b, Location loc, Value dd) {
          Value v =
              memref::LoadOp::create(b, loc, slotInT, ValueRange{dd, col});
          memref::StoreOp::create(b, loc, v, slotIn,
                                  ValueRange{ex, row, dd});
        });
      });
    });

    // Phase 2: the expert MLPs on their G * P slot rows.
    forallIndex(b, loc, e, [&](OpBuilder &b, Location loc, Value ex) {
      emitExpertMLP(
          b, loc, shape, {w1, b1, w2, b2, op.getActivation(), *panelWidth}, ex,
          rowsPerExpert, rowsPerExpert, d, h, staticD, staticH,
          [&](OpBuilder &b, Location loc, Value r, Value kk) {
            return Value(memref::LoadOp::create(b, loc, slotIn,
                                                ValueRange{ex, r, kk}));
          },
          slotOut,
          [&](OpBuilder &b, Location loc, Value r, Value n) {
            return SmallVector<Value>{ex, r, n};
          });
    });

    // Phase 3: combine weights and outputs of each group.
    Value out = allocF32(b, loc, xType.getShape(),
                         dynamicSizes({{xType.getDimSize(0), g},
                                       {xType.getDimSize(1), s},
                                       {xType.getDimSize(2), d}}));
    forallIndex(b, loc, g, [&](OpBuilder &b, Location loc, Value gr) {
      Value scratch = allocaBlockScratch(b, loc, shape);
      Value rowMax = allocF32(b, loc, {dynamic}, {s});
      Value rowSum = allocF32(b, loc, {dynamic}, {s});
      forEach(b, loc, s, [&](OpBuilder &b, Location loc, Value m) {
        softmaxStatistics(
            b, loc, j,
            [&](OpBuilder &b, Location loc, Value col) {
              return Value(memref::LoadOp::create(b, loc, logits,
                                                  ValueRange{gr, m, col}));
            },
            rowMax, rowSum, m);
      });

      // out^T[d, m] = sum_j slot_out[j, d] * softmax_j(L[g, m, j]).
      Value outT = allocF32(b, loc, {dynamic, dynamic}, {d, s});
      Value lastToken = arith::SubIOp::create(b, loc, s, indexConst(b, loc, 1));
      GemmAccessors combine;
      setPlainOutput(combine, outT, {}, vectorType);
      combine.loadA = [&](OpBuilder &b, Location loc, Value dd, Value col) {
        Value ex = arith::DivUIOp::create(b, loc, col, p);
        Value row = arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, gr, p),
            arith::RemUIOp::create(b, loc, col, p));
        return Value(
            memref::LoadOp::create(b, loc, slotOut, ValueRange{ex, row, dd}));
      };
      combine.loadB = [&](OpBuilder &b, Location loc, Value col, Value m0,
                          Value mask) {
        // L[g, m0 + l, col] for the lanes l (strided by J), clamped to the
        // last token; lanes past it are masked out below.
        SmallVector<Value> lanes;
        for (int64_t l = 0; l < shape.lanes; ++l) {
          Value m = arith::MinSIOp::create(
              b, loc,
              arith::AddIOp::create(b, loc, m0, indexConst(b, loc, l)),
              lastToken);
          lanes.push_back(memref::LoadOp::create(b, loc, logits,
                                                 ValueRange{gr, m, col}));
        }
        Value v = vector::FromElementsOp::create(b, loc, vectorType, lanes);
        return softmaxWeights(
            b, loc, v, loadVector(b, loc, vectorType, rowMax, {m0}, mask),
            loadVector(b, loc, vectorType, rowSum, {m0}, mask), mask);
      };
      emitGemm(b, loc, d, s, j, staticS, shape, combine, scratch,
               /*parallelThreads=*/Value());

      forEach(b, loc, s, [&](OpBuilder &b, Location loc, Value m) {
        forEach(b, loc, d, [&](OpBuilder &b, Location loc, Value dd) {
          Value v = memref::LoadOp::create(b, loc, outT, ValueRange{dd, m});
          memref::StoreOp::create(b, loc, v, out, ValueRange{gr, m, dd});
        });
      });
    });

    rewriter.replaceOp(op, bufferization::ToTensorOp::create(
                               b, loc, xType, out, /*restrict=*/true,
                               /*writable=*/true));
    return success();
  }

private:
  /// The dynamic sizes of a shape: `value` for every (static size, value)
  /// pair whose size is dynamic.
  static SmallVector<Value>
  dynamicSizes(ArrayRef<std::pair<int64_t, Value>> dims) {
    SmallVector<Value> sizes;
    for (auto [size, value] : dims)
      if (ShapedType::isDynamic(size))
        sizes.push_back(value);
    return sizes;
  }

  MicrokernelShape shape;
};

} // namespace

void mlir::vmoe::lowering::populateSoftMoELoweringPatterns(
    RewritePatternSet &patterns, const MicrokernelShape &shape) {
  patterns.add<SoftMoEOpLowering>(patterns.getContext(), shape);
}
