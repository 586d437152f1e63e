//===- ExpertParallelLowering.cpp - convert-vmoe-to-mpi-runtime -*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The expert parallelism ops to calls of the MPI runtime ABI
// (lib/Runtime/MPI/Exchange.cpp, docs/Distributed.md §4):
//
//   i64  vmoe_mpi_rank()
//   void vmoe_mpi_exchange_dispatch(input, expert_ids, slots, output, layer)
//   void vmoe_mpi_exchange_combine(input, expert_ids, slots, output, layer)
//
// with memrefs of dynamic sizes passed through the C interface
// (`_mlir_ciface_` with descriptor pointers). The result buffer is a fresh
// memref.alloc the deallocation pipeline frees. MLIR 22's `mpi` dialect has
// send/recv, allreduce and barrier but no all-to-all(v), hence the calls.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Conversion/Passes.h"

#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_CONVERTVMOETOMPIRUNTIMEPASS
#include "vmoe/Conversion/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;
using namespace mlir::vmoe;

/// Row-major strided memref of `rank` dynamic sizes at a dynamic offset.
static MemRefType dynamicStrided(MLIRContext *ctx, int64_t rank, Type element) {
  SmallVector<int64_t> strides(rank, ShapedType::kDynamic);
  strides.back() = 1;
  return MemRefType::get(SmallVector<int64_t>(rank, ShapedType::kDynamic),
                         element,
                         StridedLayoutAttr::get(ctx, ShapedType::kDynamic,
                                                strides));
}

/// The declaration of runtime function `name`, created once; with
/// `cInterface` (memref arguments) it is called as `_mlir_ciface_<name>`.
static func::FuncOp declare(ModuleOp module, StringRef name, FunctionType type,
                            bool cInterface) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto func = func::FuncOp::create(b, module.getLoc(), name, type);
  func.setPrivate();
  if (cInterface)
    func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  return func;
}

/// Replaces an exchange op by a call of `callee`.
template <typename OpTy>
static void lowerExchange(ModuleOp module, OpTy op, StringRef callee) {
  MLIRContext *ctx = op.getContext();
  OpBuilder b(op);
  Location loc = op.getLoc();
  Type f32 = op.getOutput().getType().getElementType();
  Type i32 = b.getI32Type();
  MemRefType floats = dynamicStrided(ctx, 4, f32);
  MemRefType ints = dynamicStrided(ctx, 3, i32);
  auto type = FunctionType::get(ctx, {floats, ints, ints, floats,
                                      b.getI64Type()}, {});
  declare(module, callee, type, /*cInterface=*/true);
  auto cast = [&](Value memref, MemRefType to) -> Value {
    return memref::CastOp::create(b, loc, to, memref);
  };
  Value input = cast(readOnlyBuffer(b, loc, op.getInput()), floats);
  Value ids = cast(readOnlyBuffer(b, loc, op.getExpertIds()), ints);
  Value slots = cast(readOnlyBuffer(b, loc, op.getSlots()), ints);
  auto outType = op.getOutput().getType();
  // Static: checked by the pass before any rewrite.
  auto outBuffer = memref::AllocOp::create(
      b, loc, MemRefType::get(outType.getShape(), f32));
  Value layer = arith::ConstantIntOp::create(
      b, loc, b.getI64Type(), static_cast<int64_t>(op.getLayer()));
  func::CallOp::create(b, loc, callee, TypeRange{},
                       ValueRange{input, ids, slots, cast(outBuffer, floats),
                                  layer});
  Value result = bufferization::ToTensorOp::create(
      b, loc, outType, outBuffer, /*restrict=*/true, /*writable=*/true);
  op.getOutput().replaceAllUsesWith(result);
  op.erase();
}

namespace mlir::vmoe {
namespace {

struct ConvertVMoEToMPIRuntimePass
    : impl::ConvertVMoEToMPIRuntimePassBase<ConvertVMoEToMPIRuntimePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<ExpertShardOp, ExchangeDispatchOp, ExchangeCombineOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
      if (!type || !type.hasStaticShape()) {
        op->emitOpError("needs static shapes to be lowered to the MPI "
                        "runtime");
        return signalPassFailure();
      }
    }
    for (Operation *op : ops) {
      if (auto shardOp = dyn_cast<ExpertShardOp>(op)) {
        OpBuilder b(shardOp);
        Location loc = shardOp.getLoc();
        auto rankType = FunctionType::get(&getContext(), {}, b.getI64Type());
        declare(module, "vmoe_mpi_rank", rankType, /*cInterface=*/false);
        Value rank = func::CallOp::create(b, loc, "vmoe_mpi_rank",
                                          b.getI64Type(), ValueRange{})
                         .getResult(0);
        auto shardType = shardOp.getShard().getType();
        Value first = arith::MulIOp::create(
            b, loc,
            arith::IndexCastOp::create(b, loc, b.getIndexType(), rank),
            arith::ConstantIndexOp::create(b, loc, shardType.getDimSize(0)));
        SmallVector<OpFoldResult> offsets(shardType.getRank(),
                                          b.getIndexAttr(0));
        offsets[0] = first;
        SmallVector<OpFoldResult> sizes;
        for (int64_t dim : shardType.getShape())
          sizes.push_back(b.getIndexAttr(dim));
        Value slice = tensor::ExtractSliceOp::create(
            b, loc, shardType, shardOp.getExperts(), offsets, sizes,
            unitStrides(b, shardType.getRank()));
        shardOp.getShard().replaceAllUsesWith(slice);
        shardOp.erase();
      } else if (auto dispatch = dyn_cast<ExchangeDispatchOp>(op)) {
        lowerExchange(module, dispatch, "vmoe_mpi_exchange_dispatch");
      } else {
        lowerExchange(module, cast<ExchangeCombineOp>(op),
                      "vmoe_mpi_exchange_combine");
      }
    }
  }
};

} // namespace
} // namespace mlir::vmoe
