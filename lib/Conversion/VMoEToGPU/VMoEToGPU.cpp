//===- VMoEToGPU.cpp - convert-vmoe-to-gpu ----------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe.fused_experts -> two tiled GEMM kernels (vmoe/Codegen/GPUGemm.h;
// FP32 SIMT, or tensor cores with mma=tf32|bf16):
//
//   hidden[e, g, r] = act(x[g, t(r)] . w1[e] + b1[e])
//   plane[i(r), g, t(r)] = (hidden[e, g, r] . w2[e] + b2[e]) * w[g, t, i]
//
// where slot r of expert e in group g holds choice i of token t, then the
// choice-ordered sum of the planes (as on the CPU). The kernels read their
// operands through bufferization.to_buffer; the scratch buffers are
// memref.alloc ops (device memory after vmoe-gpu-device-buffers).
// vmoe.assign_slots: a warp scan per expert (AssignSlotsToGPU.cpp).
// vmoe.attention: the linalg contractions and softmax that the GPU
// pipeline maps like any other (its fused loop is the CPU's).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Conversion/Passes.h"

#include "Patterns.h"

#include "vmoe/Codegen/BF16PairContraction.h"
#include "vmoe/Codegen/GPUGemm.h"
#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Support/PassOptionChecks.h"
#include "vmoe/Utils/AttentionBuilder.h"
#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_CONVERTVMOETOGPUPASS
#include "vmoe/Conversion/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;
using namespace mlir::vmoe;

/// A dim of a memref as an index value (a constant when static).
static Value dimValue(OpBuilder &b, Location loc, Value memref, int64_t i) {
  return getValueOrCreateConstantIndexOp(
      b, loc, memref::getMixedSize(b, loc, memref, i));
}

/// An i32 memref element as an index.
static Value loadIndex(OpBuilder &b, Location loc, Value memref,
                       ValueRange indices) {
  Value v = memref::LoadOp::create(b, loc, memref, indices);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}

namespace {

/// vmoe.attention -> linalg.generic contractions (k copied to kᵀ first) and
/// the softmax, as the front end builds them for the GPU target.
struct AttentionToLinalg : OpConversionPattern<AttentionOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(AttentionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ContractionBodyFn body = op.getBf16Products()
                                 ? buildBF16RoundedContractionBody
                                 : buildMultiplyAccumulateBody;
    rewriter.replaceOp(op, buildAttentionGenerics(
                               rewriter, op.getLoc(), adaptor.getQ(),
                               adaptor.getK(), adaptor.getV(), body,
                               /*copyKTransposed=*/true));
    return success();
  }
};

struct FusedExpertsToGPU : OpConversionPattern<FusedExpertsOp> {
  FusedExpertsToGPU(MLIRContext *ctx, GPUMma mma)
      : OpConversionPattern(ctx), mma(mma) {}

  /// Emits one GEMM with the kernel `mma` selects.
  void gemm(OpBuilder &b, Location loc, Value batches, Value m, Value n,
            Value k, const GPUGemmAccessors &access) const {
    if (mma == GPUMma::None)
      emitGPUGemm(b, loc, batches, m, n, k, access);
    else
      emitGPUMmaGemm(b, loc, batches, m, n, k, access, mma);
  }

  LogicalResult
  matchAndRewrite(FusedExpertsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto xType = op.getX().getType();
    int64_t k = op.getSlots().getType().getDimSize(2);
    if (ShapedType::isDynamic(k))
      return rewriter.notifyMatchFailure(op, "k must be static");
    if (!xType.getElementType().isF32())
      return rewriter.notifyMatchFailure(op, "only f32 is lowered");
    if (op.getWUp())
      return rewriter.notifyMatchFailure(
          op, "gated (SwiGLU) experts are lowered for the CPU only (issue 11)");
    Activation activation = op.getActivation();

    Value x = readOnlyBuffer(b, loc, adaptor.getX());
    Value weights = readOnlyBuffer(b, loc, adaptor.getWeights());
    Value entries = readOnlyBuffer(b, loc, adaptor.getSlotEntries());
    Value fill = readOnlyBuffer(b, loc, adaptor.getFill());
    Value w1 = readOnlyBuffer(b, loc, adaptor.getW1());
    Value b1 = readOnlyBuffer(b, loc, adaptor.getB1());
    Value w2 = readOnlyBuffer(b, loc, adaptor.getW2());
    Value b2 = readOnlyBuffer(b, loc, adaptor.getB2());
    Value g = dimValue(b, loc, x, 0), s = dimValue(b, loc, x, 1);
    Value d = dimValue(b, loc, x, 2), e = dimValue(b, loc, entries, 0);
    Value capacity = dimValue(b, loc, entries, 2), h = dimValue(b, loc, w1, 2);
    Value kIndex = indexConst(b, loc, k);
    Value batches = arith::MulIOp::create(b, loc, e, g);

    // hidden [E, G, B, H] and one plane [G, S, D] per choice.
    // (Static dims where the operands have them: the tensor-core kernels
    // copy rows of a static width in 16-byte chunks.)
    auto entriesType = cast<ShapedType>(op.getSlotEntries().getType());
    SmallVector<int64_t> hiddenShape = {
        entriesType.getDimSize(0), xType.getDimSize(0),
        entriesType.getDimSize(2),
        cast<ShapedType>(op.getW1().getType()).getDimSize(2)};
    Value hidden =
        allocWithSizes(b, loc, MemRefType::get(hiddenShape, b.getF32Type()),
                       {e, g, capacity, h});
    auto planesType = MemRefType::get(
        {k, xType.getDimSize(0), xType.getDimSize(1), xType.getDimSize(2)},
        b.getF32Type());
    Value planes = allocWithSizes(b, loc, planesType, {kIndex, g, s, d});

    // Batch entry z = e * G + g.
    auto expertOf = [&](OpBuilder &b, Location loc, Value z) {
      return Value(arith::DivUIOp::create(b, loc, z, g));
    };
    auto groupOf = [&](OpBuilder &b, Location loc, Value z) {
      return Value(arith::RemUIOp::create(b, loc, z, g));
    };
    auto entry = [&](OpBuilder &b, Location loc, Value z, Value row) {
      return loadIndex(b, loc, entries,
                       {expertOf(b, loc, z), groupOf(b, loc, z), row});
    };
    auto rowCount = [&](OpBuilder &b, Location loc, Value z) {
      return loadIndex(b, loc, fill, {expertOf(b, loc, z), groupOf(b, loc, z)});
    };

    GPUGemmAccessors up;
    up.rowCount = rowCount;
    up.elementA = [&](OpBuilder &b, Location loc, Value z, Value row,
                      Value kk) {
      Value t = arith::DivSIOp::create(b, loc, entry(b, loc, z, row), kIndex);
      return MemRefElement{x, {groupOf(b, loc, z), t, kk}};
    };
    up.elementB = [&](OpBuilder &b, Location loc, Value z, Value kk,
                      Value col) {
      return MemRefElement{w1, {expertOf(b, loc, z), kk, col}};
    };
    up.storeC = [&](OpBuilder &b, Location loc, Value z, Value row, Value col,
                    Value acc) {
      Value ex = expertOf(b, loc, z);
      Value bias = memref::LoadOp::create(b, loc, b1, ValueRange{ex, col});
      Value v = arith::AddFOp::create(b, loc, acc, bias);
      memref::StoreOp::create(
          b, loc, buildActivation(b, loc, activation, v), hidden,
          ValueRange{ex, groupOf(b, loc, z), row, col});
    };
    gemm(b, loc, batches, capacity, h, d, up);

    GPUGemmAccessors down;
    down.rowCount = rowCount;
    down.elementA = [&](OpBuilder &b, Location loc, Value z, Value row,
                        Value kk) {
      return MemRefElement{
          hidden, {expertOf(b, loc, z), groupOf(b, loc, z), row, kk}};
    };
    down.elementB = [&](OpBuilder &b, Location loc, Value z, Value kk,
                        Value col) {
      return MemRefElement{w2, {expertOf(b, loc, z), kk, col}};
    };
    down.storeC = [&](OpBuilder &b, Location loc, Value z, Value row,
                      Value col, Value acc) {
      Value ex = expertOf(b, loc, z), gr = groupOf(b, loc, z);
      Value id = entry(b, loc, z, row);
      Value t = arith::DivSIOp::create(b, loc, id, kIndex);
      Value i = arith::RemSIOp::create(b, loc, id, kIndex);
      Value bias = memref::LoadOp::create(b, loc, b2, ValueRange{ex, col});
      Value y = arith::AddFOp::create(b, loc, acc, bias);
      Value w = memref::LoadOp::create(b, loc, weights, ValueRange{gr, t, i});
      memref::StoreOp::create(b, loc, arith::MulFOp::create(b, loc, w, y),
                              planes, ValueRange{i, gr, t, col});
    };
    gemm(b, loc, batches, capacity, d, h, down);

    Value planesTensor = bufferization::ToTensorOp::create(
        b, loc, RankedTensorType::get(planesType.getShape(), b.getF32Type()),
        planes, /*restrict=*/true, /*writable=*/true);
    rewriter.replaceOp(op, buildChoiceSum(b, loc, planesTensor,
                                          adaptor.getSlots(), adaptor.getX(),
                                          k));
    return success();
  }

  GPUMma mma;
};

} // namespace

namespace mlir::vmoe {
namespace {

struct ConvertVMoEToGPUPass
    : PassWithCheckedOptions<
          ConvertVMoEToGPUPass,
          impl::ConvertVMoEToGPUPassBase<ConvertVMoEToGPUPass>> {
  using PassWithCheckedOptions::PassWithCheckedOptions;

  llvm::Error checkOptions() { return checkGPUMmaOption("mma", mma); }

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    if (failed(verifyOptions()))
      return signalPassFailure();
    std::optional<GPUMma> kind = parseGPUMma(mma);
    // Expert choice and Soft MoE are lowered for the CPU only (issue 11);
    // their loops would otherwise reach the kernel outliner and fail there.
    WalkResult cpuOnly = getOperation()->walk([](Operation *op) {
      // Weights in the CPU microkernel's panel layout: the frontend packs
      // them for the CPU target only.
      auto fused = dyn_cast<FusedExpertsOp>(op);
      if (fused && fused.getWeightPanels()) {
        op->emitOpError("weight_panels has no GPU lowering (weights are "
                        "packed into panels for the CPU target only)");
        return WalkResult::interrupt();
      }
      if (!isa<ExpertChoiceOp, ExpertChoiceExpertsOp, SoftMoEOp>(op))
        return WalkResult::advance();
      op->emitOpError("has no GPU lowering yet (expert choice and Soft MoE "
                      "run on the CPU target)");
      return WalkResult::interrupt();
    });
    if (cpuOnly.wasInterrupted())
      return signalPassFailure();
    ConversionTarget target(*ctx);
    target.addIllegalOp<FusedExpertsOp, AttentionOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(ctx);
    patterns.add<FusedExpertsToGPU>(ctx, *kind);
    patterns.add<AttentionToLinalg>(ctx);
    populateAssignSlotsToGPUPatterns(target, patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::vmoe
