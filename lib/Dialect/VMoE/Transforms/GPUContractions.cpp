//===- GPUContractions.cpp - vmoe-gpu-contractions --------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Buffer-level f32 linalg contractions (the dense MLP, the qkv and out
// projections, attention's Q K^T and P V, the head) become one tiled GEMM
// kernel each (vmoe/Codegen/GPUGemm.h: shared-memory SIMT FP32, or tensor
// cores), instead of one thread per output element with the whole sum in
// the thread. The op's dims are classified from its indexing maps: one
// reduction dim k (in A and B), the row dim m (the innermost dim in A and
// C only), the column dim n (the innermost dim in B and C only); every
// other dim is a batch dim, linearized into the kernel's batch index. The
// operands are read through the op's own maps, so views (strided, permuted,
// transposed) need no copies.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"

#include "vmoe/Codegen/GPUGemm.h"
#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Support/PassOptionChecks.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "vmoe-gpu-contractions"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEGPUCONTRACTIONSPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;
using namespace mlir::vmoe;

namespace {

/// How the output of a contraction got all +0.0 (see zeroInitializer).
struct ZeroInit {
  /// The zero linalg.fill of the output, or the memref.copy into it from a
  /// zero-filled buffer; null when there is none.
  Operation *op = nullptr;
  /// Whether something between `op` and the contraction may read the
  /// output (`op` must then stay).
  bool read = false;
};

/// A contraction C[...] += A[...] * B[...] read as a batched GEMM.
struct GemmForm {
  /// Operand numbers of A and B (0 or 1) and the op's indexing maps.
  unsigned a, b;
  SmallVector<AffineMap> maps;
  /// Loop dims: rows, columns, reduction, and the batch dims (outermost
  /// first; the last varies fastest in the batch index).
  unsigned m, n, k;
  SmallVector<unsigned> batch;
  /// What set every element of the output to +0.0 before the op, if
  /// anything: the kernel then starts its sums from 0.0 instead of reading
  /// the output, and the initializer goes unless something reads the
  /// output in between.
  ZeroInit zeroInit;
};

} // namespace

/// The dim of a projected-permutation map result.
static unsigned dimOf(AffineExpr expr) {
  return cast<AffineDimExpr>(expr).getPosition();
}

/// Whether the body of `op` is `acc + x * y` or `math.fma(x, y, acc)` with x,
/// y the two input elements (in either order) and acc the output element.
static bool isMultiplyAccumulate(linalg::LinalgOp op) {
  Block *body = op.getBlock();
  if (body->getNumArguments() != 3 || !llvm::hasNItemsOrLess(*body, 3))
    return false;
  Value x = body->getArgument(0), y = body->getArgument(1);
  Value acc = body->getArgument(2);
  auto isProductOfInputs = [&](Value lhs, Value rhs) {
    return (lhs == x && rhs == y) || (lhs == y && rhs == x);
  };
  Value yielded = body->getTerminator()->getOperand(0);
  if (auto fma = yielded.getDefiningOp<math::FmaOp>())
    return llvm::hasSingleElement(body->without_terminator()) &&
           fma.getC() == acc && isProductOfInputs(fma.getA(), fma.getB());
  auto add = yielded.getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value other = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  if (other == acc || (add.getLhs() != acc && add.getRhs() != acc))
    return false;
  auto mul = other.getDefiningOp<arith::MulFOp>();
  return mul && mul->getBlock() == body &&
         isProductOfInputs(mul.getLhs(), mul.getRhs());
}

/// The allocation or argument a memref is a view of.
static Value viewRoot(Value memref) {
  while (auto view = memref.getDefiningOp<ViewLikeOpInterface>())
    memref = view.getViewSource();
  return memref;
}

/// Whether `root` (a view root) is a fresh allocation, which no other root
/// aliases.
static bool isAllocation(Value root) {
  return root.getDefiningOp<memref::AllocOp>() ||
         root.getDefiningOp<memref::AllocaOp>();
}

/// Whether `op` may write (or, with `reads`, read) the memory of `root`, a
/// fresh allocation. Views of other allocations and of the function's
/// arguments do not alias it; memory of any other provenance might.
static bool mayAccess(Operation *op, Value root, bool reads) {
  if (isMemoryEffectFree(op))
    return false;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return true;
  SmallVector<MemoryEffects::EffectInstance> instances;
  effects.getEffects(instances);
  for (const MemoryEffects::EffectInstance &instance : instances) {
    if (isa<MemoryEffects::Allocate>(instance.getEffect()) ||
        (!reads && isa<MemoryEffects::Read>(instance.getEffect())))
      continue;
    Value value = instance.getValue();
    if (!value)
      return true;
    Value other = viewRoot(value);
    auto argument = dyn_cast<BlockArgument>(other);
    Operation *owner = argument ? argument.getOwner()->getParentOp() : nullptr;
    if (other == root ||
        (!isAllocation(other) && !isa_and_nonnull<FunctionOpInterface>(owner)))
      return true;
  }
  return false;
}

/// Whether `op` is a linalg.fill of +0.0 into exactly `buffer`.
static bool isZeroFillOf(Operation *op, Value buffer) {
  auto fill = dyn_cast<linalg::FillOp>(op);
  return fill && fill.hasPureBufferSemantics() &&
         fill.getDpsInitOperand(0)->get() == buffer &&
         matchPattern(fill.getDpsInputOperand(0)->get(), m_PosZeroFloat());
}

/// The op before `op` in its block that last set every element of `buffer`
/// (an allocation or a view of one) to +0.0, with nothing in between that
/// writes its memory: a zero linalg.fill of `buffer`, or, with `allowCopy`,
/// a memref.copy into `buffer` from a buffer so filled.
static ZeroInit zeroInitializer(Operation *op, Value buffer, bool allowCopy) {
  Value root = viewRoot(buffer);
  if (!isAllocation(root))
    return {};
  bool read = false;
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (isZeroFillOf(prev, buffer))
      return {prev, read};
    auto copy = dyn_cast<memref::CopyOp>(prev);
    if (allowCopy && copy && copy.getTarget() == buffer) {
      if (!zeroInitializer(copy, copy.getSource(), /*allowCopy=*/false).op)
        return {};
      return {prev, read};
    }
    if (mayAccess(prev, root, /*reads=*/false))
      return {};
    read = read || mayAccess(prev, root, /*reads=*/true);
  }
  return {};
}

/// Whether `op` sits inside a kernel or a parallel loop (it then runs in
/// one thread of that kernel; vmoe-gpu-linalg-to-loops lowers it in place).
static bool isNested(Operation *op) {
  return op->getParentOfType<scf::ForallOp>() ||
         op->getParentOfType<scf::ParallelOp>() ||
         op->getParentOfType<gpu::LaunchOp>() ||
         op->getParentOfType<gpu::GPUFuncOp>();
}

/// Reads `op` as a batched GEMM, or says why not.
static FailureOr<GemmForm> matchGemm(linalg::LinalgOp op) {
  auto reject = [&](const Twine &why) -> FailureOr<GemmForm> {
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": leaving " << op->getName()
                            << " at " << op.getLoc() << ": " << why << "\n");
    return failure();
  };
  if (isNested(op))
    return reject("nested in a kernel or a parallel loop");
  if (!op.hasPureBufferSemantics())
    return reject("not on buffers");
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return reject("not two inputs and one output");
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type || !type.getElementType().isF32())
      return reject("an operand is not an f32 memref");
  }
  if (!isMultiplyAccumulate(op))
    return reject("the body is not a multiply-accumulate");
  GemmForm form;
  form.maps = op.getIndexingMapsArray();
  if (!llvm::all_of(form.maps, [](AffineMap map) {
        return map.isProjectedPermutation(/*allowZeroInResults=*/false);
      }))
    return reject("an indexing map is not a projected permutation");

  // Which operands each dim indexes.
  unsigned numLoops = op.getNumLoops();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  AffineMap cMap = form.maps[2];
  SmallVector<unsigned> reductions, onlyIn0, onlyIn1;
  for (unsigned d = 0; d < numLoops; ++d) {
    bool in0 = form.maps[0].isFunctionOfDim(d);
    bool in1 = form.maps[1].isFunctionOfDim(d);
    bool inC = cMap.isFunctionOfDim(d);
    if (iterators[d] == utils::IteratorType::reduction) {
      if (inC || !in0 || !in1)
        return reject("a reduction dim is not a contraction dim");
      reductions.push_back(d);
      continue;
    }
    if (!inC)
      return reject("a parallel dim does not index the output");
    if (in0 && !in1)
      onlyIn0.push_back(d);
    if (in1 && !in0)
      onlyIn1.push_back(d);
  }
  if (reductions.size() != 1)
    return reject("not exactly one reduction dim");
  if (onlyIn0.empty() || onlyIn1.empty())
    return reject("no row or no column dim (a matrix-vector product)");
  form.k = reductions.front();

  // n is the candidate innermost in C (stores along it coalesce), B the
  // input that holds it; m the innermost A-only dim in C.
  auto positionInC = [&](unsigned d) {
    return *cMap.getResultPosition(getAffineDimExpr(d, op.getContext()));
  };
  auto innermostInC = [&](ArrayRef<unsigned> dims) {
    return *llvm::max_element(dims, [&](unsigned x, unsigned y) {
      return positionInC(x) < positionInC(y);
    });
  };
  unsigned last0 = innermostInC(onlyIn0), last1 = innermostInC(onlyIn1);
  bool oneIsB = positionInC(last1) > positionInC(last0);
  form.a = oneIsB ? 0 : 1;
  form.b = 1 - form.a;
  form.m = oneIsB ? last0 : last1;
  form.n = oneIsB ? last1 : last0;
  for (unsigned d = 0; d < numLoops; ++d)
    if (d != form.m && d != form.n && d != form.k)
      form.batch.push_back(d);

  // Every output element has one writer: the output must not share memory
  // with an input.
  Value c = viewRoot(op.getDpsInitOperand(0)->get());
  if (c == viewRoot(op.getDpsInputOperand(0)->get()) ||
      c == viewRoot(op.getDpsInputOperand(1)->get()))
    return reject("the output is a view of an input");
  form.zeroInit = zeroInitializer(op, op.getDpsInitOperand(0)->get(),
                                  /*allowCopy=*/true);
  return form;
}

/// Emits the kernel of `op` read as `form` before it and erases the op.
static void rewriteAsGemm(IRRewriter &rewriter, linalg::LinalgOp op,
                          const GemmForm &form, GPUMma mma) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  OpBuilder &b = rewriter;
  SmallVector<Range, 4> ranges = op.createLoopRanges(b, loc);
  auto size = [&](unsigned d) {
    return getValueOrCreateConstantIndexOp(b, loc, ranges[d].size);
  };
  Value m = size(form.m), n = size(form.n), k = size(form.k);
  // Batch dim i is (batch / stride_i) mod size_i, the last one fastest.
  SmallVector<Value> batchSizes, batchStrides(form.batch.size());
  for (unsigned d : form.batch)
    batchSizes.push_back(size(d));
  Value batches = arith::ConstantIndexOp::create(b, loc, 1);
  for (int64_t i = form.batch.size() - 1; i >= 0; --i) {
    batchStrides[i] = batches;
    batches = b.createOrFold<arith::MulIOp>(loc, batches, batchSizes[i]);
  }
  // Without columns there is nothing to store; no block runs then (the
  // staging of B would read index -1).
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value hasColumns =
      b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, n, zero);
  Value rows = b.createOrFold<arith::SelectOp>(loc, hasColumns, m, zero);

  Value aMem = op.getDpsInputOperand(form.a)->get();
  Value bMem = op.getDpsInputOperand(form.b)->get();
  Value cMem = op.getDpsInitOperand(0)->get();
  AffineMap aMap = form.maps[form.a], bMap = form.maps[form.b];
  AffineMap cMap = form.maps[2];
  // The indices of an operand (through `map`) at batch entry `batch` and
  // the given m, n or k values (null where the operand has no such dim).
  auto indices = [&](OpBuilder &b, Location loc, AffineMap map, Value batch,
                     Value row, Value col, Value red) {
    MemRefElement element;
    for (AffineExpr expr : map.getResults()) {
      unsigned d = dimOf(expr);
      if (d == form.m || d == form.n || d == form.k) {
        element.indices.push_back(d == form.m ? row : d == form.n ? col : red);
        continue;
      }
      // The outermost batch dim needs no remainder, the innermost (stride
      // 1) no division.
      unsigned i = llvm::find(form.batch, d) - form.batch.begin();
      Value v = batch;
      if (i + 1 != form.batch.size())
        v = b.createOrFold<arith::DivUIOp>(loc, v, batchStrides[i]);
      if (i != 0)
        v = b.createOrFold<arith::RemUIOp>(loc, v, batchSizes[i]);
      element.indices.push_back(v);
    }
    return element;
  };

  GPUGemmAccessors access;
  access.rowCount = [&](OpBuilder &, Location, Value) { return rows; };
  access.elementA = [&](OpBuilder &b, Location loc, Value batch, Value row,
                        Value red) {
    MemRefElement e = indices(b, loc, aMap, batch, row, Value(), red);
    e.memref = aMem;
    return e;
  };
  access.elementB = [&](OpBuilder &b, Location loc, Value batch, Value red,
                        Value col) {
    MemRefElement e = indices(b, loc, bMap, batch, Value(), col, red);
    e.memref = bMem;
    return e;
  };
  access.aKContiguous = dimOf(aMap.getResults().back()) == form.k;
  access.bKContiguous = dimOf(bMap.getResults().back()) == form.k;
  // linalg semantics: the sum starts from the output's current value (0.0
  // when zeroInit set it, the kernel's default).
  if (!form.zeroInit.op)
    access.initC = [&](OpBuilder &b, Location loc, Value batch, Value row,
                       Value col) {
      MemRefElement e = indices(b, loc, cMap, batch, row, col, Value());
      e.memref = cMem;
      return loadElement(b, loc, e);
    };
  access.storeC = [&](OpBuilder &b, Location loc, Value batch, Value row,
                      Value col, Value acc) {
    MemRefElement e = indices(b, loc, cMap, batch, row, col, Value());
    memref::StoreOp::create(b, loc, acc, cMem, e.indices);
  };
  // Router logits decide routing: FP32 products, whatever `mma` says.
  if (mma == GPUMma::None || op->hasAttr(kRouterLogitsAttrName))
    emitGPUGemm(b, loc, batches, m, n, k, access);
  else
    emitGPUMmaGemm(b, loc, batches, m, n, k, access, mma);
  rewriter.eraseOp(op);
  // The kernel writes every element of the output, and nothing read the
  // initializer's values: it is dead.
  if (form.zeroInit.op && !form.zeroInit.read)
    rewriter.eraseOp(form.zeroInit.op);
}

namespace mlir::vmoe {
namespace {

struct VMoEGPUContractionsPass
    : PassWithCheckedOptions<
          VMoEGPUContractionsPass,
          impl::VMoEGPUContractionsPassBase<VMoEGPUContractionsPass>> {
  using PassWithCheckedOptions::PassWithCheckedOptions;

  llvm::Error checkOptions() { return checkGPUMmaOption("mma", mma); }

  void runOnOperation() override {
    if (failed(verifyOptions()))
      return signalPassFailure();
    std::optional<GPUMma> kind = parseGPUMma(mma);
    SmallVector<std::pair<linalg::LinalgOp, GemmForm>> gemms;
    getOperation().walk([&](linalg::LinalgOp op) {
      FailureOr<GemmForm> form = matchGemm(op);
      if (succeeded(form))
        gemms.emplace_back(op, std::move(*form));
    });
    IRRewriter rewriter(&getContext());
    for (auto &[op, form] : gemms)
      rewriteAsGemm(rewriter, op, form, *kind);
  }
};

} // namespace
} // namespace mlir::vmoe
