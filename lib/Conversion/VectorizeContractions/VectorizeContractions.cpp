//===- VectorizeContractions.cpp - vmoe-vectorize-contractions --*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Buffer-level linalg contractions -> loops around the GEMM microkernel.
// The loop dims are classified with linalg::inferContractionDims: batch and
// all but the innermost M dim become outer scf.for loops, the innermost M
// dim is the row dim of the microkernel, the N dim its (contiguous) column
// dim and the K dim its reduction. The accumulator starts from the current
// output, so the rewrite keeps the semantics of `out += a * b`; when a
// linalg.fill of +0.0 into the output comes right before, it starts from
// zero registers instead and the fill is erased. A B operand
// in panel layout (constant weights packed once at load; its map ends in
// `(n floordiv L, k, n mod L)`, vmoe/Codegen/PanelLayout.h) is read in
// place; any other B is packed into a scratch on every call. A bf16 pair
// contraction (its B bf16 pair panels through `(..., n floordiv L,
// k floordiv 2, n mod L)`, its body the pair product of
// vmoe/Codegen/BF16PairContraction.h) rounds its A rows to pairs into a
// stack scratch per block of rows, then runs the microkernel over pairs of
// k (BF16Pairs.h).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Conversion/Passes.h"

#include "vmoe/Codegen/BF16PairContraction.h"
#include "vmoe/Codegen/BF16Pairs.h"
#include "vmoe/Codegen/MemRefShapes.h"
#include "vmoe/Codegen/Microkernel.h"
#include "vmoe/Codegen/PanelLayout.h"
#include "vmoe/Support/PassOptionChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEVECTORIZECONTRACTIONSPASS
#include "vmoe/Conversion/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;
using namespace mlir::vmoe;

/// Contractions smaller than this many multiply-adds stay on one thread:
/// forking costs more than they take.
static constexpr int64_t kParallelWorkThreshold = 1 << 20;

/// Bytes of the A pair scratch of a bf16 pair contraction: rows are rounded
/// in blocks of this much (at least one register tile of rows).
static constexpr int64_t kPairScratchBytes = 128 * 1024;

/// Bytes of B pair panels a rounded contraction may pack per call (all of
/// B at once; attention's kᵀ and v per image and head are a few KB).
static constexpr int64_t kPackedPairBytes = 256 * 1024;

/// Indices of `operand` at the loop point `ivs` (dim -> value).
static SmallVector<Value> operandIndices(AffineMap map,
                                         const DenseMap<unsigned, Value> &ivs) {
  SmallVector<Value> indices;
  for (AffineExpr expr : map.getResults())
    indices.push_back(ivs.lookup(cast<AffineDimExpr>(expr).getPosition()));
  return indices;
}

/// The linalg.fill of +0.0 into `c` that comes right before `op` (only
/// allocations and ops without memory effects between), or null. A GEMM
/// that stores every element of c makes it redundant: it starts from zero
/// accumulators.
static linalg::FillOp precedingZeroFill(Operation *op, Value c) {
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (auto fill = dyn_cast<linalg::FillOp>(prev)) {
      if (fill.hasPureBufferSemantics() && fill.getOutputs()[0] == c &&
          matchPattern(fill.getInputs()[0], m_PosZeroFloat()))
        return fill;
      return nullptr;
    }
    if (!isMemoryEffectFree(prev) &&
        !isa<memref::AllocOp, memref::AllocaOp>(prev))
      return nullptr;
  }
  return nullptr;
}

/// The buffer `v` is a view of (or is) `base`.
static Value viewSource(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// An elementwise linalg.generic that finishes C in place right after the
/// contraction (bias, activation), evaluated on the accumulator registers
/// before they are stored (GemmAccessors::storeC) instead of in a pass of
/// its own over C.
struct Epilogue {
  linalg::GenericOp op;
  /// Per input: the C dims its indices come from (map results).
  SmallVector<SmallVector<unsigned>> inputDims;
  /// Per input: whether it varies along C's last (column) dim; if so that
  /// is its last, contiguous dim and it is read by vectors.
  SmallVector<bool> alongColumns;
  /// An epilogue out of place: its input that is C (the accumulator, not
  /// read) and the bf16 buffer of C's shape it writes (its body ends in
  /// the rounding); -1 and null in place.
  int64_t accInput = -1;
  Value dest;

  /// The body on vectors: `acc` is the accumulator, inputs are read at the
  /// C indices `cIndices` (column vector at cIndices.back()).
  Value apply(OpBuilder &b, Location loc, VectorType type, Value acc,
              ArrayRef<Value> cIndices, Value mask) {
    IRMapping map;
    Block &body = op.getRegion().front();
    for (auto [i, operand] : llvm::enumerate(op.getDpsInputOperands())) {
      if (static_cast<int64_t>(i) == accInput) {
        map.map(body.getArgument(i), acc);
        continue;
      }
      SmallVector<Value> indices;
      for (unsigned d : inputDims[i])
        indices.push_back(cIndices[d]);
      Value value;
      if (alongColumns[i]) {
        value = loadVector(b, loc, type, operand->get(), indices, mask);
      } else {
        value = memref::LoadOp::create(b, loc, operand->get(), indices);
        value = vector::BroadcastOp::create(b, loc, type, value);
      }
      map.map(body.getArgument(i), value);
    }
    map.map(body.getArgument(op.getNumDpsInputs()), acc);
    for (Operation &inner : body.without_terminator()) {
      for (Value operand : inner.getOperands()) {
        if (map.contains(operand))
          continue;
        // Defined above: a scalar, broadcast. A constant is cloned here,
        // as it may sit between the contraction and the epilogue.
        Value scalar = operand;
        if (Operation *def = operand.getDefiningOp();
            def && def->hasTrait<OpTrait::ConstantLike>())
          scalar = b.clone(*def)->getResult(0);
        map.map(operand,
                vector::BroadcastOp::create(
                    b, loc, VectorType::get(type.getShape(), operand.getType()),
                    scalar));
      }
      OperationState state(inner.getLoc(), inner.getName());
      for (Value operand : inner.getOperands())
        state.operands.push_back(map.lookup(operand));
      for (Type t : inner.getResultTypes())
        state.types.push_back(VectorType::get(type.getShape(), t));
      state.attributes = inner.getAttrs();
      Operation *vectorOp = b.create(state);
      map.map(inner.getResults(), vectorOp->getResults());
    }
    return map.lookup(body.getTerminator()->getOperand(0));
  }
};

/// The dim of `c` each dim of `view` indexes, when `view` is `c` or a
/// memref.collapse_shape of it whose groups each hold at most one non-unit
/// dim (the same elements in the same order, unit dims dropped: a layer's
/// [1, 1, M, N] result seen as [M, N]).
static std::optional<SmallVector<unsigned>> dimsOfCView(Value view, Value c) {
  auto cType = cast<MemRefType>(c.getType());
  if (view == c)
    return llvm::to_vector(llvm::seq<unsigned>(0, cType.getRank()));
  auto collapse = view.getDefiningOp<memref::CollapseShapeOp>();
  if (!collapse || collapse.getSrc() != c)
    return std::nullopt;
  SmallVector<unsigned> dims;
  for (const ReassociationIndices &group : collapse.getReassociationIndices()) {
    unsigned dim = group.back();
    int nonUnit = 0;
    for (int64_t d : group)
      if (cType.getDimSize(d) != 1) {
        dim = d;
        ++nonUnit;
      }
    if (nonUnit > 1)
      return std::nullopt;
    dims.push_back(dim);
  }
  return dims;
}

/// An epilogue of a contraction `op` writing `c`: the next op with memory
/// effects after `after` (the contraction, or the epilogue before), when
/// it is an all-parallel linalg.generic whose only output is `c` or a
/// collapsed view of it (dimsOfCView; identity map), whose inputs are other
/// buffers read along C's dims (C's last dim, if used, last and contiguous),
/// and whose body is made of elementwise arith/math ops on f32, i32 (bit
/// manipulation of floats) and i1.
static std::optional<Epilogue> followingEpilogue(Operation *op,
                                                 Operation *after, Value c) {
  // Allocations between touch neither C nor the inputs (an out-of-place
  // epilogue's destination may be allocated right before it).
  Operation *next = after->getNextNode();
  while (next && (isMemoryEffectFree(next) || isa<memref::AllocOp>(next)))
    next = next->getNextNode();
  auto generic = dyn_cast_or_null<linalg::GenericOp>(next);
  if (!generic || !generic.hasPureBufferSemantics() ||
      generic.getNumDpsInits() != 1 || generic.getNumReductionLoops() != 0 ||
      !generic.getMatchingIndexingMap(generic.getDpsInitOperand(0))
           .isIdentity())
    return std::nullopt;
  auto cType = cast<MemRefType>(c.getType());
  Epilogue epilogue{generic, {}, {}, -1, Value()};
  // The C dim of each of the generic's loops: its output is C (or a view),
  // or, out of place, a bf16 buffer of C's shape that the rounding of an
  // identity input C fills.
  Block &body = generic.getRegion().front();
  Value init = generic.getDpsInitOperand(0)->get();
  std::optional<SmallVector<unsigned>> cDims = dimsOfCView(init, c);
  if (!cDims) {
    auto destType = dyn_cast<MemRefType>(init.getType());
    auto yield = cast<linalg::YieldOp>(body.getTerminator());
    auto round = yield.getOperand(0).getDefiningOp<arith::TruncFOp>();
    if (!destType || !destType.getElementType().isBF16() ||
        destType.getShape() != cType.getShape() ||
        !hasUnitInnerStride(destType) || !round ||
        round.getRoundingmodeAttr() ||
        !body.getArgument(generic.getNumDpsInputs()).use_empty())
      return std::nullopt;
    // The GEMM stores into it: allocated before the contraction (an
    // allocation after it, of static size, moves up).
    if (Operation *def = init.getDefiningOp();
        def && def->getBlock() == op->getBlock() && !def->isBeforeInBlock(op)) {
      if (!isa<memref::AllocOp>(def) || def->getNumOperands() != 0)
        return std::nullopt;
      def->moveBefore(op);
    }
    for (OpOperand *input : generic.getDpsInputOperands())
      if (input->get() == c &&
          generic.getMatchingIndexingMap(input).isIdentity())
        epilogue.accInput = input->getOperandNumber();
    if (epilogue.accInput < 0)
      return std::nullopt;
    epilogue.dest = init;
    cDims = llvm::to_vector(llvm::seq<unsigned>(0, cType.getRank()));
  }
  unsigned last = cType.getRank() - 1;
  for (OpOperand *input : generic.getDpsInputOperands()) {
    if (static_cast<int64_t>(input->getOperandNumber()) == epilogue.accInput) {
      epilogue.inputDims.push_back(*cDims);
      epilogue.alongColumns.push_back(true);
      continue;
    }
    auto type = dyn_cast<MemRefType>(input->get().getType());
    AffineMap map = generic.getMatchingIndexingMap(input);
    if (!type || !type.getElementType().isF32() ||
        viewSource(input->get()) == viewSource(c) ||
        !map.isProjectedPermutation(/*allowZeroInResults=*/false))
      return std::nullopt;
    // The GEMM's loops read it: it must be defined before the contraction.
    if (Operation *def = input->get().getDefiningOp();
        def && def->getBlock() == op->getBlock() && !def->isBeforeInBlock(op))
      return std::nullopt;
    SmallVector<unsigned> dims;
    for (AffineExpr expr : map.getResults())
      dims.push_back((*cDims)[cast<AffineDimExpr>(expr).getPosition()]);
    bool along = llvm::is_contained(dims, last);
    if (along && (dims.back() != last || !hasUnitInnerStride(type)))
      return std::nullopt;
    epilogue.inputDims.push_back(dims);
    epilogue.alongColumns.push_back(along);
  }
  for (Operation &inner : body.without_terminator()) {
    if (!OpTrait::hasElementwiseMappableTraits(&inner) ||
        inner.getNumRegions() != 0 ||
        !isa<arith::ArithDialect, math::MathDialect>(inner.getDialect()))
      return std::nullopt;
    // bf16 only as the rounding an out-of-place epilogue ends in.
    for (Type t :
         llvm::concat<Type>(inner.getOperandTypes(), inner.getResultTypes()))
      if (!t.isF32() && !t.isInteger(1) && !t.isInteger(32) &&
          !(t.isBF16() && epilogue.dest && isa<arith::TruncFOp>(inner)))
        return std::nullopt;
    // A value from outside the body must be available at the contraction:
    // a constant (cloned there), or defined before it.
    for (Value operand : inner.getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || def->getBlock() != op->getBlock() ||
          def->hasTrait<OpTrait::ConstantLike>())
        continue;
      if (!def->isBeforeInBlock(op))
        return std::nullopt;
    }
  }
  return epilogue;
}

/// Whether the body of `op` (two inputs, one init) is exactly
/// `acc + a * b` (either operand order) on its block arguments.
static bool isMulAddBody(linalg::GenericOp op) {
  Block &body = *op.getBlock();
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      std::distance(body.begin(), body.end()) != 3)
    return false;
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getNumOperands() == 1
                 ? yield.getOperand(0).getDefiningOp<arith::AddFOp>()
                 : nullptr;
  if (!add)
    return false;
  Value acc = body.getArgument(2), product = add.getRhs();
  if (add.getLhs() != acc)
    product = add.getLhs();
  if ((add.getLhs() != acc && add.getRhs() != acc) || product == acc)
    return false;
  auto mul = product.getDefiningOp<arith::MulFOp>();
  if (!mul || mul->getBlock() != &body)
    return false;
  Value x = body.getArgument(0), y = body.getArgument(1);
  return (mul.getLhs() == x && mul.getRhs() == y) ||
         (mul.getLhs() == y && mul.getRhs() == x);
}

/// Makes the C accessors of `access` (start, finish, partial sums) address
/// row `r0 + row` of C for the GEMM's row `row`: a GEMM over the block of
/// rows that starts at r0.
static void offsetCRows(GemmAccessors &access, Value r0) {
  using Load = std::function<Value(OpBuilder &, Location, Value, Value, Value)>;
  using Store =
      std::function<void(OpBuilder &, Location, Value, Value, Value, Value)>;
  auto shiftLoad = [r0](Load load) -> Load {
    return
        [r0, load](OpBuilder &b, Location loc, Value row, Value n, Value mask) {
          return load(b, loc, arith::AddIOp::create(b, loc, r0, row), n, mask);
        };
  };
  auto shiftStore = [r0](Store store) -> Store {
    return [r0, store](OpBuilder &b, Location loc, Value row, Value n,
                       Value acc, Value mask) {
      store(b, loc, arith::AddIOp::create(b, loc, r0, row), n, acc, mask);
    };
  };
  access.initC = shiftLoad(access.initC);
  access.loadPartial = shiftLoad(access.loadPartial);
  access.storeC = shiftStore(access.storeC);
  access.storePartial = shiftStore(access.storePartial);
  if (auto prefetch = access.prefetchC)
    access.prefetchC = [r0, prefetch](OpBuilder &b, Location loc, Value row,
                                      Value n) {
      prefetch(b, loc, arith::AddIOp::create(b, loc, r0, row), n);
    };
}

/// Emits the number of threads the next parallel region gets (an index,
/// at least 1).
using ThreadCountBuilder = llvm::function_ref<Value(OpBuilder &, Location)>;

/// Rewrites one contraction; fails (leaving it alone) when it does not fit.
/// An epilogue it folds in is erased and added to `erased`.
static LogicalResult
vectorizeContraction(RewriterBase &rewriter, linalg::GenericOp op,
                     const MicrokernelShape &baseShape, bool parallel,
                     ThreadCountBuilder maxThreads,
                     SmallPtrSetImpl<Operation *> &erased) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1)
    return failure();
  // B may come in panel layout (constant weights packed once at load): its
  // map ends in (n floordiv L, k, n mod L) and the contraction is
  // classified on its plain (k, n) map.
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  std::optional<PanelOperandMap> panel;
  for (unsigned i = 0; i < 2; ++i) {
    std::optional<PanelOperandMap> match = matchPanelOperandMap(maps[i]);
    if (!match)
      continue;
    if (panel || match->width % baseShape.lanes != 0)
      return failure();
    panel = match;
    maps[i] = match->plain;
  }
  bool pairs = panel && panel->pairs;
  // Both operands rounded to bf16 (attention with --precision=bf16): B is
  // packed into pair panels per call.
  bool rounded = !panel && isBF16RoundedContractionBody(op);
  FailureOr<linalg::ContractionDimensions> dims = failure();
  if (rounded) {
    dims = linalg::inferContractionDims(maps);
  } else if (!panel) {
    // Exactly acc + a * b: linalg's contraction check also admits casts of
    // the operands (a rounding to bf16 the microkernel would drop).
    if (!linalg::isaContractionOpInterface(op) || !isMulAddBody(op))
      return failure();
    dims = linalg::inferContractionDims(op);
  } else if (pairs) {
    // The body is checked below, once A, B and k are known.
    dims = linalg::inferContractionDims(maps);
  } else {
    auto mulAdd = [](Operation *mul, Operation *add) {
      return isa<arith::MulFOp>(mul) && isa<arith::AddFOp>(add);
    };
    if (op.getNumReductionLoops() == 0 ||
        !linalg::detail::isContractionBody(*op.getBlock(), mulAdd))
      return failure();
    dims = linalg::inferContractionDims(maps);
  }
  if (failed(dims) || dims->n.size() != 1 || dims->k.size() != 1 ||
      dims->m.empty())
    return failure();
  if (!llvm::all_of(maps, [](AffineMap map) {
        return map.isProjectedPermutation(/*allowZeroInResults=*/false);
      }))
    return failure();
  unsigned nDim = dims->n.front(), kDim = dims->k.front();

  // The operand holding N is B; its rows and the output's must be
  // contiguous along N.
  OpOperand *lhs = op.getDpsInputOperand(0), *rhs = op.getDpsInputOperand(1);
  auto mapOf = [&](OpOperand *operand) {
    return maps[operand->getOperandNumber()];
  };
  if (mapOf(lhs).isFunctionOfDim(nDim))
    std::swap(lhs, rhs);
  OpOperand *out = op.getDpsInitOperand(0);
  AffineMap aMap = mapOf(lhs);
  AffineMap bMap = mapOf(rhs);
  AffineMap cMap = mapOf(out);
  auto lastDim = [](AffineMap map) {
    return cast<AffineDimExpr>(map.getResults().back()).getPosition();
  };
  // A rounded contraction packs B per call, so B may also be contiguous
  // along k (attention's q kᵀ reading k's rows: no kᵀ copy).
  bool bTransposed = rounded && lastDim(bMap) == kDim;
  if (!bMap.isFunctionOfDim(nDim) || aMap.isFunctionOfDim(nDim) ||
      (lastDim(bMap) != nDim && !bTransposed) || lastDim(cMap) != nDim)
    return failure();
  // Panels hold B only (A is read by rows) and have their k, n as B's.
  bool bInPanels = panel && panel->plain == bMap;
  if (panel &&
      (!bInPanels || cast<AffineDimExpr>(bMap.getResults().drop_back().back())
                             .getPosition() != kDim))
    return failure();
  // bf16 pairs: the body must be the pair product of A and the pair words,
  // and A rows contiguous along k (they are rounded to pairs by vectors).
  if (pairs && (!isBF16PairContractionBody(op, lhs->getOperandNumber(),
                                           rhs->getOperandNumber(), kDim) ||
                lastDim(aMap) != kDim))
    return failure();
  if (rounded && lastDim(aMap) != kDim)
    return failure();
  auto aType = dyn_cast<MemRefType>(lhs->get().getType());
  auto bType = dyn_cast<MemRefType>(rhs->get().getType());
  auto cType = dyn_cast<MemRefType>(out->get().getType());
  // A stored as bf16 (pairs only): its rows are pair words already, read
  // in place. An odd K would read a word half past the row: loops instead.
  bool aInPairs = pairs && aType && aType.getElementType().isBF16();
  if (aInPairs && (ShapedType::isDynamic(op.getStaticLoopRanges()[kDim]) ||
                   op.getStaticLoopRanges()[kDim] % 2 != 0))
    return failure();
  if (!aType || !bType || !cType || !hasUnitInnerStride(bType) ||
      !hasUnitInnerStride(cType) || !cType.getElementType().isF32() ||
      !(aType.getElementType().isF32() || aInPairs) ||
      !bType.getElementType().isF32() ||
      ((pairs || rounded) && !hasUnitInnerStride(aType)) ||
      (bInPanels && bType.isDynamicDim(bType.getRank() - 1)))
    return failure();

  // The row dim: the innermost M dim in the output.
  unsigned rowDim = dims->m.front();
  for (AffineExpr expr : cMap.getResults()) {
    unsigned d = cast<AffineDimExpr>(expr).getPosition();
    if (llvm::is_contained(dims->m, d))
      rowDim = d;
  }

  // A destination zero-filled just before: the first block of k starts
  // from zero instead of loading C, and the fill goes (every element of C
  // is stored once K >= 1).
  SmallVector<int64_t> loopSizes = op.getStaticLoopRanges();
  linalg::FillOp zeroFill;
  if (!ShapedType::isDynamic(loopSizes[kDim]) && loopSizes[kDim] >= 1)
    zeroFill = precedingZeroFill(op, out->get());
  // An elementwise op finishing C right after: applied to the registers of
  // the last block of k before they are stored (needs K >= 1 too).
  // A chain of them (bias, then a residual add) applies in order.
  SmallVector<Epilogue> epilogues;
  if (!ShapedType::isDynamic(loopSizes[kDim]) && loopSizes[kDim] >= 1) {
    Operation *after = op;
    while (std::optional<Epilogue> next =
               followingEpilogue(op, after, out->get())) {
      epilogues.push_back(*next);
      after = next->op;
      if (next->dest)
        break; // C is final in its bf16 copy.
    }
  }

  std::optional<int64_t> staticN;
  if (!ShapedType::isDynamic(loopSizes[nDim]))
    staticN = loopSizes[nDim];
  // Panels of B (packed here or at load, f32 or pairs) are read a vector
  // at a time, so any tile width fits them: the one that pads fewest
  // columns.
  const MicrokernelShape shape = tileForColumns(baseShape, staticN);
  // Rounded contractions: B [K, N] as pair panels of the vector width,
  // enough of them for every tile (past N zero), on the stack per call.
  int64_t bLanePanels = 0;
  if (rounded) {
    if (!staticN || ShapedType::isDynamic(loopSizes[kDim]))
      return failure();
    bLanePanels = llvm::divideCeil(*staticN, shape.panelWidth()) * shape.vectors;
    if (bLanePanels * ((loopSizes[kDim] + 1) / 2) * shape.lanes * 4 >
        kPackedPairBytes)
      return failure();
  }

  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  auto linalgOp = cast<linalg::LinalgOp>(op.getOperation());
  SmallVector<Range, 4> ranges = linalgOp.createLoopRanges(rewriter, loc);
  auto size = [&](unsigned d) {
    return getValueOrCreateConstantIndexOp(rewriter, loc, ranges[d].size);
  };
  SmallVector<int64_t> staticSizes = linalgOp.getStaticLoopRanges();
  int64_t work = staticProduct(staticSizes);
  bool large = ShapedType::isDynamic(work) || work >= kParallelWorkThreshold;
  // Outer loops over every dim but rows, columns and reduction.
  SmallVector<unsigned> outerDims;
  for (unsigned d = 0, e = op.getNumLoops(); d < e; ++d)
    if (d != rowDim && d != nDim && d != kDim)
      outerDims.push_back(d);
  Value a = lhs->get(), bMem = rhs->get(), c = out->get();
  // Where the finished C goes: C, or the bf16 copy an epilogue makes.
  Value finalC = c;
  if (!epilogues.empty() && epilogues.back().dest)
    finalC = epilogues.back().dest;
  auto vectorType = VectorType::get({shape.lanes}, rewriter.getF32Type());
  // Batched GEMMs (images x heads of attention, experts) split their
  // batches across threads, each packing on its own stack; single GEMMs
  // split their column panels. Either way every output element has
  // one writer and one summation order, whatever the thread count.
  int64_t batches = 1;
  for (unsigned d : outerDims)
    batches =
        ShapedType::isDynamic(staticSizes[d]) || ShapedType::isDynamic(batches)
            ? ShapedType::kDynamic
            : batches * staticSizes[d];
  bool parallelBatches = parallel && large && !outerDims.empty() &&
                         (ShapedType::isDynamic(batches) || batches >= 2);
  bool parallelPanels = parallel && large && !parallelBatches;

  // bf16 pairs: per block of rows, the A rows rounded to pair words in a
  // stack scratch (stacksave / alloca / stackrestore, as the packing
  // scratch), then the GEMM of the block over pairs of k, B's words read
  // from the panels in place and C's rows offset by the block's first.
  int64_t staticK = staticSizes[kDim];
  int64_t staticWords =
      ShapedType::isDynamic(staticK) ? ShapedType::kDynamic : (staticK + 1) / 2;
  int64_t blockRows = ShapedType::isDynamic(staticWords)
                          ? 8 * shape.rows
                          : std::max<int64_t>(1, kPairScratchBytes / 4 /
                                                     staticWords / shape.rows) *
                                shape.rows;
  // `bPacked`: B's pair panels packed for this call (packBPairs), else B
  // is read from its stored pair panels in place.
  auto pairGemm = [&](OpBuilder &b, Location loc, const GemmAccessors &plain,
                      const DenseMap<unsigned, Value> &ivs, Value bPacked) {
    auto index = [&](int64_t v) {
      return Value(arith::ConstantIndexOp::create(b, loc, v));
    };
    Value m = size(rowDim), n = size(nDim), k = size(kDim);
    Value words = arith::CeilDivUIOp::create(b, loc, k, index(2));
    // One block of rows: its A rows rounded to pairs on this thread's
    // stack, then the GEMM of the block over all columns.
    auto rowBlock = [&](OpBuilder &b, Location loc, Value r0, Value rows) {
      auto shifted = [&](OpBuilder &b, Location loc, Value row) {
        return Value(arith::AddIOp::create(b, loc, r0, row));
      };
      GemmAccessors access = plain;
      access.loadA = nullptr;
      access.loadB = nullptr;
      access.loadBPairs = [&](OpBuilder &b, Location loc, Value pair, Value n) {
        if (bPacked)
          return loadPairPanelWords(b, loc, shape.lanes, bPacked, ValueRange{},
                                    pair, n);
        SmallVector<Value> lead = operandIndices(bMap, ivs);
        lead.resize(lead.size() - 2); // Leading dims only.
        return loadPairPanelWords(b, loc, shape.lanes, bMem, lead, pair, n);
      };
      offsetCRows(access, r0);
      if (aInPairs) {
        // The word of A[row, 2 pair .. 2 pair + 1], read in place.
        access.loadAPair = [&](OpBuilder &b, Location loc, Value row,
                               Value pair) {
          DenseMap<unsigned, Value> at = ivs;
          at[rowDim] = shifted(b, loc, row);
          at[kDim] = arith::MulIOp::create(b, loc, pair, index(2));
          Value halves = vector::LoadOp::create(
              b, loc, VectorType::get({2}, b.getBF16Type()), a,
              operandIndices(aMap, at));
          Value word = vector::BitCastOp::create(
              b, loc, VectorType::get({1}, b.getI32Type()), halves);
          return Value(vector::ExtractOp::create(b, loc, word, 0));
        };
        emitGemm(b, loc, rows, n, k, staticN, shape, access,
                 /*scratch=*/Value(), /*parallelThreads=*/Value());
        return;
      }
      Value stack = LLVM::StackSaveOp::create(
          b, loc, LLVM::LLVMPointerType::get(b.getContext()));
      auto scratchType =
          MemRefType::get({blockRows, staticWords}, b.getI32Type());
      SmallVector<Value> dynamicSizes;
      if (ShapedType::isDynamic(staticWords))
        dynamicSizes.push_back(words);
      Value aPairs = memref::AllocaOp::create(b, loc, scratchType, dynamicSizes,
                                              b.getI64IntegerAttr(64));
      BF16PairProducts products{shape.bf16Dot, shape.lanes};
      products.roundRowsToPairs(
          b, loc, aPairs, rows, k, a,
          [&](OpBuilder &b, Location loc, Value row) {
            DenseMap<unsigned, Value> at = ivs;
            at[rowDim] = shifted(b, loc, row);
            at[kDim] = arith::ConstantIndexOp::create(b, loc, 0);
            SmallVector<Value> indices = operandIndices(aMap, at);
            indices.pop_back(); // k, the last (contiguous) dim.
            return indices;
          });
      access.loadAPair = [&](OpBuilder &b, Location loc, Value row,
                             Value pair) {
        return Value(
            memref::LoadOp::create(b, loc, aPairs, ValueRange{row, pair}));
      };
      emitGemm(b, loc, rows, n, k, staticN, shape, access,
               /*scratch=*/Value(), /*parallelThreads=*/Value());
      LLVM::StackRestoreOp::create(b, loc, stack);
    };
    // Large GEMMs split their blocks of rows across threads (each rounds
    // its own rows; one writer per row of C), so that no thread waits while
    // another rounds A, as splitting the columns of each block would.
    // Balanced blocks of row tiles (emitBalancedBlocks): every thread
    // gets the same number of rows.
    if (parallelPanels) {
      emitBalancedBlocks(b, loc, m, shape.rows, blockRows / shape.rows,
                         maxThreads(b, loc), rowBlock);
      return;
    }
    scf::ForOp::create(b, loc, index(0), m, index(blockRows), ValueRange{},
                       [&](OpBuilder &b, Location loc, Value r0, ValueRange) {
                         Value rows = arith::MinSIOp::create(
                             b, loc, index(blockRows),
                             arith::SubIOp::create(b, loc, m, r0));
                         rowBlock(b, loc, r0, rows);
                         scf::YieldOp::create(b, loc);
                       });
  };

  // B [K, N] of one call rounded to pair panels [P, ceil(K/2), lanes] of
  // i32 on the stack (BF16PairProducts::packPanels).
  auto packBPairs = [&](OpBuilder &b, Location loc,
                        const DenseMap<unsigned, Value> &ivs) {
    BF16PairProducts products{shape.bf16Dot, shape.lanes};
    return products.packPanels(
        b, loc, bMem, bLanePanels, staticSizes[kDim], *staticN, bTransposed,
        [&](OpBuilder &b, Location loc, Value k, Value n) {
          DenseMap<unsigned, Value> at = ivs;
          at[kDim] = k;
          at[nDim] = n;
          return operandIndices(bMap, at);
        });
  };

  std::function<void(OpBuilder &, Location, unsigned,
                     DenseMap<unsigned, Value> &)>
      nest = [&](OpBuilder &b, Location loc, unsigned level,
                 DenseMap<unsigned, Value> &ivs) {
        if (level == 0 && parallelBatches) {
          SmallVector<Value> lbs, ubs, steps;
          for (unsigned d : outerDims) {
            lbs.push_back(arith::ConstantIndexOp::create(b, loc, 0));
            ubs.push_back(size(d));
            steps.push_back(arith::ConstantIndexOp::create(b, loc, 1));
          }
          scf::ParallelOp::create(
              b, loc, lbs, ubs, steps,
              [&](OpBuilder &b, Location loc, ValueRange parallelIvs) {
                for (auto [d, iv] : llvm::zip_equal(outerDims, parallelIvs))
                  ivs[d] = iv;
                nest(b, loc, outerDims.size(), ivs);
              });
          return;
        }
        if (level < outerDims.size()) {
          unsigned d = outerDims[level];
          scf::ForOp::create(
              b, loc, arith::ConstantIndexOp::create(b, loc, 0), size(d),
              arith::ConstantIndexOp::create(b, loc, 1), ValueRange{},
              [&](OpBuilder &b, Location loc, Value iv, ValueRange) {
                ivs[d] = iv;
                nest(b, loc, level + 1, ivs);
                scf::YieldOp::create(b, loc);
              });
          return;
        }
        GemmAccessors access;
        access.loadA = [&](OpBuilder &b, Location loc, Value row, Value k) {
          DenseMap<unsigned, Value> at = ivs;
          at[rowDim] = row;
          at[kDim] = k;
          return Value(
              memref::LoadOp::create(b, loc, a, operandIndices(aMap, at)));
        };
        access.loadB = [&](OpBuilder &b, Location loc, Value k, Value n,
                           Value mask) {
          DenseMap<unsigned, Value> at = ivs;
          at[kDim] = k;
          at[nDim] = n;
          return loadVector(b, loc, vectorType, bMem, operandIndices(bMap, at),
                            mask);
        };
        // Panels are read in place, nothing is packed.
        if (bInPanels)
          access.loadPackedB = [&](OpBuilder &b, Location loc, Value k,
                                   Value n) {
            SmallVector<Value> lead = operandIndices(bMap, ivs);
            lead.resize(lead.size() - 2); // Leading dims only.
            return loadPanelVector(b, loc, vectorType, bMem, lead, k, n);
          };
        if (bInPanels)
          access.prefetchB = [&](OpBuilder &b, Location loc, Value k, Value n) {
            SmallVector<Value> lead = operandIndices(bMap, ivs);
            lead.resize(lead.size() - 2);
            prefetchPanelVector(b, loc, bMem, lead, k, n);
          };
        // C's indices at (row, n) of this GEMM.
        auto cIndices = [&](Value row, Value n) {
          DenseMap<unsigned, Value> at = ivs;
          at[rowDim] = row;
          at[nDim] = n;
          return operandIndices(cMap, at);
        };
        // Between blocks of k C holds the partial sums (zero start or not).
        access.loadPartial = [&](OpBuilder &b, Location loc, Value row, Value n,
                                 Value mask) {
          return loadVector(b, loc, vectorType, c, cIndices(row, n), mask);
        };
        access.storePartial = [&](OpBuilder &b, Location loc, Value row,
                                  Value n, Value acc, Value mask) {
          storeVector(b, loc, acc, c, cIndices(row, n), mask);
        };
        access.initC = [&](OpBuilder &b, Location loc, Value row, Value n,
                           Value mask) {
          if (zeroFill)
            return Value(arith::ConstantOp::create(b, loc, vectorType,
                                                   b.getZeroAttr(vectorType)));
          return access.loadPartial(b, loc, row, n, mask);
        };
        // Weight GEMMs (B in stored panels, f32 or pairs) fetch the lines
        // their epilogue reads by rows and columns (a residual) and C's
        // lines while the tile computes: rows 2 KB or more apart, which
        // the hardware prefetchers do not follow, and each tile would
        // otherwise wait on them when it stores.
        if (bInPanels || pairs)
          access.prefetchC = [&](OpBuilder &b, Location loc, Value row,
                                 Value n) {
            SmallVector<Value> indices = cIndices(row, n);
            memref::PrefetchOp::create(b, loc, finalC, indices,
                                       /*isWrite=*/true,
                                       /*localityHint=*/3,
                                       /*isDataCache=*/true);
            for (Epilogue &epilogue : epilogues)
              for (auto [i, input] :
                   llvm::enumerate(epilogue.op.getDpsInputOperands())) {
                // Rows and columns: not a bias (columns) or a scalar; not
                // C, which an out-of-place epilogue never reads.
                if (static_cast<int64_t>(i) == epilogue.accInput ||
                    !epilogue.alongColumns[i] ||
                    epilogue.inputDims[i].size() < 2)
                  continue;
                SmallVector<Value> at;
                for (unsigned d : epilogue.inputDims[i])
                  at.push_back(indices[d]);
                // To L2: the tile streams more B than L1 holds.
                memref::PrefetchOp::create(b, loc, input->get(), at,
                                           /*isWrite=*/false,
                                           /*localityHint=*/2,
                                           /*isDataCache=*/true);
              }
          };
        // The last block of k: the epilogue, then the store.
        access.storeC = [&](OpBuilder &b, Location loc, Value row, Value n,
                            Value acc, Value mask) {
          SmallVector<Value> indices = cIndices(row, n);
          for (Epilogue &epilogue : epilogues)
            acc = epilogue.apply(b, loc, vectorType, acc, indices, mask);
          storeVector(b, loc, acc, finalC, indices, mask);
        };
        if (pairs) {
          pairGemm(b, loc, access, ivs, /*bPacked=*/Value());
          return;
        }
        if (rounded) {
          Value stack = LLVM::StackSaveOp::create(
              b, loc, LLVM::LLVMPointerType::get(b.getContext()));
          Value packed = packBPairs(b, loc, ivs);
          pairGemm(b, loc, access, ivs, packed);
          LLVM::StackRestoreOp::create(b, loc, stack);
          return;
        }
        // After bufferization: the packing scratch goes on the stack.
        emitGemm(b, loc, size(rowDim), size(nDim), size(kDim), staticN,
                 shape, access,
                 /*scratch=*/Value(),
                 parallelPanels ? maxThreads(b, loc) : Value());
      };
  DenseMap<unsigned, Value> ivs;
  nest(rewriter, loc, 0, ivs);
  rewriter.eraseOp(op);
  if (zeroFill)
    rewriter.eraseOp(zeroFill);
  for (Epilogue &epilogue : epilogues) {
    erased.insert(epilogue.op);
    rewriter.eraseOp(epilogue.op);
  }
  return success();
}

/// The declaration of `int omp_get_max_threads(void)` in `module`, added
/// at its start when missing.
static func::FuncOp getOrDeclareMaxThreads(ModuleOp module) {
  constexpr StringLiteral name = "omp_get_max_threads";
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  auto decl = func::FuncOp::create(
      b, module.getLoc(), name, b.getFunctionType({}, {b.getI32Type()}));
  decl.setPrivate();
  return decl;
}

namespace mlir::vmoe {
namespace {

struct VMoEVectorizeContractionsPass
    : PassWithCheckedOptions<VMoEVectorizeContractionsPass,
                             impl::VMoEVectorizeContractionsPassBase<
                                 VMoEVectorizeContractionsPass>> {
  using PassWithCheckedOptions::PassWithCheckedOptions;

  llvm::Error checkOptions() {
    return checkMicrokernelOptions(lanes, tileRows, tileVectors,
                                   /*zeroMeansDefault=*/false);
  }

  void runOnOperation() override {
    if (failed(verifyOptions()))
      return signalPassFailure();
    // vdpbf16ps exists for 4, 8 and 16 f32 lanes; the pair GEMMs step
    // over k pairs within blocks of k that start at even k.
    bool dot = bf16Dot && (lanes == 4 || lanes == 8 || lanes == 16);
    MicrokernelShape shape{tileRows, tileVectors, lanes, dot};
    shape.prefetch = prefetch;
    ModuleOp module = getOperation();
    Operation *clash =
        parallel ? module.lookupSymbol("omp_get_max_threads") : nullptr;
    if (clash) {
      auto func = dyn_cast<func::FuncOp>(clash);
      if (!func || func.getFunctionType() !=
                       FunctionType::get(&getContext(), {},
                                         {IntegerType::get(&getContext(), 32)})) {
        clash->emitError("omp_get_max_threads must be the OpenMP runtime's "
                         "() -> i32");
        return signalPassFailure();
      }
    }
    // omp_get_max_threads of the OpenMP runtime, declared on first use.
    func::FuncOp threadsFunc;
    auto maxThreads = [&](OpBuilder &b, Location loc) {
      if (!threadsFunc)
        threadsFunc = getOrDeclareMaxThreads(module);
      Value threads =
          func::CallOp::create(b, loc, threadsFunc, ValueRange{}).getResult(0);
      threads = arith::MaxSIOp::create(
          b, loc, threads,
          arith::ConstantIntOp::create(b, loc, b.getI32Type(), 1));
      return Value(arith::IndexCastUIOp::create(b, loc, b.getIndexType(),
                                                threads));
    };
    SmallVector<linalg::GenericOp> candidates;
    module.walk(
        [&](linalg::GenericOp op) { candidates.push_back(op); });
    IRRewriter rewriter(&getContext());
    SmallPtrSet<Operation *, 8> erased; // Epilogues folded into GEMMs.
    for (linalg::GenericOp op : candidates) {
      if (erased.contains(op))
        continue;
      if (succeeded(
              vectorizeContraction(rewriter, op, shape, parallel,
                                   maxThreads, erased)))
        continue;
    }
    // The L x L tiles of packed transposed B operands to shuffles (16
    // lanes: shuffle_16x16, as vmoe-vectorize-transposes), before
    // convert-vector-to-llvm would move them element by element.
    SmallVector<Operation *> transposes;
    module.walk([&](vector::TransposeOp op) { transposes.push_back(op); });
    if (!transposes.empty()) {
      RewritePatternSet lowering(&getContext());
      vector::populateVectorTransposeLoweringPatterns(
          lowering, lanes == 16 ? vector::VectorTransposeLowering::Shuffle16x16
                                : vector::VectorTransposeLowering::Shuffle1D);
      (void)applyOpPatternsGreedily(transposes, std::move(lowering));
    }
    // Pair contractions left for convert-linalg-to-loops round A with
    // arith.truncf to bf16, and epilogues storing bf16 (folded or left)
    // round their results with it, which targets without bf16 conversions
    // would call a runtime function for: integer arithmetic instead.
    if (dot)
      return;
    SmallVector<Operation *> leftRounding;
    module.walk([&](arith::TruncFOp trunc) {
      if (getElementTypeOrSelf(trunc.getType()).isBF16())
        leftRounding.push_back(trunc);
    });
    if (leftRounding.empty())
      return;
    RewritePatternSet patterns(&getContext());
    arith::populateExpandBFloat16Patterns(patterns);
    SmallVector<Operation *> extensions;
    for (Operation *trunc : leftRounding)
      for (Operation *user : trunc->getUsers())
        extensions.push_back(user);
    leftRounding.append(extensions);
    (void)applyOpPatternsGreedily(leftRounding, std::move(patterns));
  }
};

} // namespace
} // namespace mlir::vmoe
