//===- StreamingStores.cpp - vmoe-streaming-stores --------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Marked row-wise linalg.generic ops on buffers -> scf.if (runtime flag and
// an aligned output) { vector loops with non-temporal stores } else { the
// op } (Passes.td says why and when).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Support/OptionChecks.h"
#include "vmoe/Support/PassOptionChecks.h"

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOESTREAMINGSTORESPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

namespace {

/// How an operand of the generic is read per (row, vector of columns).
enum class Access { Element, Row, Column };

/// The access of an operand through `map`: (d0, d1), (d0) or (d1).
std::optional<Access> accessOf(AffineMap map) {
  if (map.getNumDims() != 2 || map.getNumSymbols() != 0)
    return std::nullopt;
  if (map.isIdentity())
    return Access::Element;
  if (map.getNumResults() != 1)
    return std::nullopt;
  auto dim = dyn_cast<AffineDimExpr>(map.getResult(0));
  if (!dim)
    return std::nullopt;
  return dim.getPosition() == 0 ? Access::Row : Access::Column;
}

/// Whether the last dim of `type` has unit stride.
bool hasUnitLastStride(MemRefType type) {
  SmallVector<int64_t> strides;
  int64_t offset;
  return type.getRank() > 0 &&
         succeeded(type.getStridesAndOffset(strides, offset)) &&
         strides.back() == 1;
}

/// Why `op` cannot be rewritten, or an empty string.
std::string unsupportedReason(linalg::GenericOp op, int64_t lanes) {
  if (!op.hasPureBufferSemantics())
    return "not on buffers";
  if (op.getNumDpsInits() != 1 || op.getNumLoops() != 2 ||
      op.getNumParallelLoops() != 2)
    return "not one output over two parallel dims";
  auto out = cast<MemRefType>(op.getDpsInits()[0].getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!out.getElementType().isF32() || out.getRank() != 2 ||
      failed(out.getStridesAndOffset(strides, offset)) || strides[1] != 1)
    return "the output is not f32 rows";
  if (ShapedType::isDynamic(strides[0]) || strides[0] % 16 != 0)
    return "the output's row stride is not a static multiple of 64 bytes";
  if (out.isDynamicDim(1) || out.getDimSize(1) % lanes != 0)
    return "the output's last dim is not a static multiple of the lanes";
  if (!op.getIndexingMapsArray().back().isIdentity())
    return "the output is not written through (d0, d1)";
  for (OpOperand *input : op.getDpsInputOperands()) {
    auto type = dyn_cast<MemRefType>(input->get().getType());
    std::optional<Access> access = accessOf(op.getMatchingIndexingMap(input));
    if (!type || !access)
      return "an input is not read through (d0, d1), (d0) or (d1)";
    bool ok = *access == Access::Element
                  ? type.getRank() == 2 && hasUnitLastStride(type)
              : *access == Access::Row
                  ? type.getRank() == 1
                  : type.getRank() == 1 && hasUnitLastStride(type);
    if (!ok)
      return "an input's rank or layout does not fit its map";
  }
  for (Operation &inner : op.getBody()->without_terminator()) {
    if (!inner.hasTrait<OpTrait::Elementwise>() || inner.getNumRegions() != 0 ||
        inner.getNumResults() != 1 ||
        !isa<arith::ArithDialect, math::MathDialect>(inner.getDialect()))
      return "the body holds an op that is not elementwise arith or math";
    for (Value v : inner.getOperands())
      if (!isa<FloatType, IntegerType, IndexType>(v.getType()))
        return "the body holds a non-scalar value";
  }
  return "";
}

/// scf.for over [0, ub) step `step` without carried values.
void forLoop(OpBuilder &b, Location loc, Value ub, int64_t step,
             function_ref<void(OpBuilder &, Location, Value)> body) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value stepValue = arith::ConstantIndexOp::create(b, loc, step);
  scf::ForOp::create(b, loc, zero, ub, stepValue, ValueRange{},
                     [&](OpBuilder &b, Location loc, Value iv, ValueRange) {
                       body(b, loc, iv);
                       scf::YieldOp::create(b, loc);
                     });
}

/// The rows of `op` as vectors of `lanes`, each result written with a
/// non-temporal, 64-byte (or lanes x 4 byte) aligned vector.store.
void emitStreamingLoops(OpBuilder &b, Location loc, linalg::GenericOp op,
                        int64_t lanes) {
  Value out = op.getDpsInits()[0];
  auto vectorType = [&](Type element) {
    return VectorType::get({lanes}, element);
  };
  Value rows = memref::DimOp::create(b, loc, out, 0);
  Value columns = memref::DimOp::create(b, loc, out, 1);
  Block *body = op.getBody();
  int64_t alignment = std::min<int64_t>(64, lanes * 4);
  forLoop(b, loc, rows, 1, [&](OpBuilder &b, Location loc, Value r) {
    // Row operands: one scalar per row, broadcast in the vector loop.
    IRMapping rowValues;
    for (OpOperand *input : op.getDpsInputOperands())
      if (*accessOf(op.getMatchingIndexingMap(input)) == Access::Row)
        rowValues.map(
            body->getArgument(input->getOperandNumber()),
            memref::LoadOp::create(b, loc, input->get(), ValueRange{r}));
    forLoop(b, loc, columns, lanes, [&](OpBuilder &b, Location loc, Value c) {
      IRMapping mapping;
      for (OpOperand &operand : op->getOpOperands()) {
        BlockArgument arg = body->getArgument(operand.getOperandNumber());
        if (arg.use_empty())
          continue;
        Type element = arg.getType();
        if (Value scalar = rowValues.lookupOrNull(arg)) {
          mapping.map(arg, vector::BroadcastOp::create(
                               b, loc, vectorType(element), scalar));
          continue;
        }
        std::optional<Access> access =
            accessOf(op.getMatchingIndexingMap(&operand));
        SmallVector<Value> indices = *access == Access::Column
                                         ? SmallVector<Value>{c}
                                         : SmallVector<Value>{r, c};
        mapping.map(arg, vector::LoadOp::create(b, loc, vectorType(element),
                                                operand.get(), indices));
      }
      for (Operation &inner : body->without_terminator()) {
        SmallVector<Value> operands;
        for (Value v : inner.getOperands()) {
          Value mapped = mapping.lookupOrNull(v);
          if (!mapped) // defined above the generic: a scalar
            mapped =
                vector::BroadcastOp::create(b, loc, vectorType(v.getType()), v);
          else if (!isa<VectorType>(mapped.getType()))
            mapped = vector::BroadcastOp::create(
                b, loc, vectorType(mapped.getType()), mapped);
          operands.push_back(mapped);
        }
        OperationState state(inner.getLoc(), inner.getName(), operands,
                             {vectorType(inner.getResult(0).getType())},
                             inner.getAttrs());
        mapping.map(inner.getResult(0), b.create(state)->getResult(0));
      }
      Value result = body->getTerminator()->getOperand(0);
      Value vector = mapping.lookupOrNull(result);
      if (!vector) // the yielded value comes from outside the body
        vector =
            vector::BroadcastOp::create(b, loc, vectorType(result.getType()),
                                        mapping.lookupOrDefault(result));
      vector::StoreOp::create(b, loc, vector, out, ValueRange{r, c},
                              /*nontemporal=*/true,
                              llvm::MaybeAlign(alignment));
    });
  });
}

} // namespace

namespace mlir::vmoe {
namespace {

struct VMoEStreamingStoresPass
    : PassWithCheckedOptions<
          VMoEStreamingStoresPass,
          impl::VMoEStreamingStoresPassBase<VMoEStreamingStoresPass>> {
  using PassWithCheckedOptions::PassWithCheckedOptions;

  llvm::Error checkOptions() {
    if (llvm::Error e = ::vmoe::checkRange("lanes", lanes, 1, 64))
      return e;
    if (lanes & (lanes - 1))
      return llvm::createStringError("lanes must be a power of two, got " +
                                     llvm::Twine(lanes));
    return llvm::Error::success();
  }

  void runOnOperation() override {
    if (failed(verifyOptions()))
      return signalPassFailure();
    ModuleOp module = getOperation();
    SmallVector<linalg::GenericOp> ops;
    module.walk([&](linalg::GenericOp op) {
      if (!op->hasAttr(kStreamingStoresAttrName))
        return;
      op->removeAttr(kStreamingStoresAttrName);
      if (unsupportedReason(op, lanes).empty())
        ops.push_back(op);
    });
    if (ops.empty())
      return;
    OpBuilder b(module.getBodyRegion());
    auto flagType = MemRefType::get({}, b.getI32Type());
    if (!module.lookupSymbol(kStreamingStoresFlagName)) {
      b.setInsertionPointToStart(module.getBody());
      memref::GlobalOp::create(b, module.getLoc(), kStreamingStoresFlagName,
                               /*sym_visibility=*/StringAttr(), flagType,
                               /*initial_value=*/Attribute(),
                               /*constant=*/false, /*alignment=*/nullptr);
    }
    for (linalg::GenericOp op : ops) {
      Location loc = op.getLoc();
      b.setInsertionPoint(op);
      Value flag = memref::LoadOp::create(
          b, loc,
          memref::GetGlobalOp::create(b, loc, flagType,
                                      kStreamingStoresFlagName),
          ValueRange{});
      Value on = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ne, flag,
          arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0));
      // The output's first element on a 64-byte boundary (then every row
      // is: the row stride is a multiple of 64 bytes).
      Value out = op.getDpsInits()[0];
      auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, out);
      Value pointer =
          memref::ExtractAlignedPointerAsIndexOp::create(b, loc, out);
      Value address = arith::AddIOp::create(
          b, loc, pointer,
          arith::MulIOp::create(b, loc, metadata.getOffset(),
                                arith::ConstantIndexOp::create(b, loc, 4)));
      int64_t alignment = std::min<int64_t>(64, lanes * 4);
      Value aligned = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::eq,
          arith::RemUIOp::create(
              b, loc, address,
              arith::ConstantIndexOp::create(b, loc, alignment)),
          arith::ConstantIndexOp::create(b, loc, 0));
      auto branch = scf::IfOp::create(
          b, loc, arith::AndIOp::create(b, loc, on, aligned),
          [&](OpBuilder &b, Location loc) {
            emitStreamingLoops(b, loc, op, lanes);
            scf::YieldOp::create(b, loc);
          },
          [&](OpBuilder &b, Location loc) { scf::YieldOp::create(b, loc); });
      op->moveBefore(branch.elseBlock()->getTerminator());
    }
  }
};

} // namespace
} // namespace mlir::vmoe
