//===- GPUEmulateKernels.cpp - vmoe-gpu-emulate-kernels ---------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// gpu.module (LLVM + NVVM dialects)  ==>  host functions + gpu.binary:
//
//   gpu.module @m { llvm.func @k(...) attributes {nvvm.kernel} ... }
//     -> llvm.func internal @__vmoe_emu_m_k(...)        the kernel's body
//        llvm.func internal @__vmoe_emu_m_k_entry(ptr)  loads each argument
//        a global constructor registering the entries and shared variables
//        gpu.binary @m [#gpu.object<#nvvm.target, "vmoe-emu:<token>">]
//
// NVVM operations become calls of include/vmoe/Runtime/GPUEmulator/
// vmoe_gpu_emulator.h; pointers of every address space become host
// pointers. The token is the module's name and a hash of its text, so that
// objects compiled separately do not collide in one process.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/Transforms/Passes.h"
#include "vmoe/Runtime/GPUEmulator/vmoe_gpu_emulator.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/xxhash.h"

namespace mlir::vmoe {
#define GEN_PASS_DEF_VMOEGPUEMULATEKERNELSPASS
#include "vmoe/Dialect/VMoE/Transforms/Passes.h.inc"
} // namespace mlir::vmoe

using namespace mlir;

namespace {

/// Builds the calls of the emulator's functions, declaring them on first use
/// in the host module.
class EmulatorCalls {
public:
  EmulatorCalls(ModuleOp host) : host(host), ctx(host.getContext()) {}

  Type i32() const { return IntegerType::get(ctx, 32); }
  Type i64() const { return IntegerType::get(ctx, 64); }
  Type ptr() const { return LLVM::LLVMPointerType::get(ctx); }
  Type voidType() const { return LLVM::LLVMVoidType::get(ctx); }

  Value call(OpBuilder &b, Location loc, StringRef name, Type result,
             ValueRange args) {
    SmallVector<Type> types;
    for (Value arg : args)
      types.push_back(arg.getType());
    LLVM::LLVMFuncOp callee = declare(name, result, types);
    auto op = LLVM::CallOp::create(b, loc, callee, args);
    return op.getNumResults() ? op.getResult() : Value();
  }

  Value constant(OpBuilder &b, Location loc, Type type, int64_t v) {
    return LLVM::ConstantOp::create(b, loc, type,
                                    b.getIntegerAttr(type, v));
  }

private:
  LLVM::LLVMFuncOp declare(StringRef name, Type result, TypeRange args) {
    if (auto f = host.lookupSymbol<LLVM::LLVMFuncOp>(name))
      return f;
    OpBuilder b(ctx);
    b.setInsertionPointToStart(host.getBody());
    return LLVM::LLVMFuncOp::create(
        b, host.getLoc(), name, LLVM::LLVMFunctionType::get(result, SmallVector<Type>(args)));
  }

  ModuleOp host;
  MLIRContext *ctx;
};

/// An alloca of `count` elements of `element` at the start of the entry
/// block of the function around `op` (not inside loops).
Value entryAlloca(OpBuilder &b, Operation *op, Type element, int64_t count) {
  auto func = op->getParentOfType<LLVM::LLVMFuncOp>();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&func.getBody().front());
  Location loc = func.getLoc();
  Value size = LLVM::ConstantOp::create(b, loc, b.getI32Type(),
                                        b.getI32IntegerAttr(count));
  return LLVM::AllocaOp::create(b, loc, LLVM::LLVMPointerType::get(
                                           b.getContext()),
                                element, size, /*alignment=*/16);
}

/// Stores `values` (32-bit each, bitcast to i32) into a fresh array.
Value storeWords(OpBuilder &b, Location loc, Operation *at,
                 ValueRange values) {
  Type i32 = b.getI32Type();
  Value array = entryAlloca(b, at, i32, values.size());
  for (auto [i, v] : llvm::enumerate(values)) {
    Value word = v.getType() == i32
                     ? v
                     : Value(LLVM::BitcastOp::create(b, loc, i32, v));
    Value slot = LLVM::GEPOp::create(
        b, loc, array.getType(), i32, array,
        ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
    LLVM::StoreOp::create(b, loc, word, slot);
  }
  return array;
}

/// Loads `count` elements of `element` from `array` into a struct of
/// `structType` (or the value itself when count is 1 and structType is not
/// a struct).
Value loadStruct(OpBuilder &b, Location loc, Value array, Type element,
                 Type structType, int64_t count) {
  auto load = [&](int64_t i) -> Value {
    Value slot = LLVM::GEPOp::create(
        b, loc, array.getType(), element, array,
        ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
    return LLVM::LoadOp::create(b, loc, element, slot);
  };
  auto st = dyn_cast<LLVM::LLVMStructType>(structType);
  if (!st)
    return load(0);
  Value result = LLVM::PoisonOp::create(b, loc, structType);
  for (int64_t i = 0; i < count; ++i) {
    Value v = load(i);
    Type field = st.getBody()[i];
    if (field != element)
      v = LLVM::BitcastOp::create(b, loc, field, v);
    result = LLVM::InsertValueOp::create(b, loc, result, v,
                                         ArrayRef<int64_t>{i});
  }
  return result;
}

/// The special register an NVVM op reads, or -1.
int32_t specialRegister(Operation *op) {
  return llvm::TypeSwitch<Operation *, int32_t>(op)
      .Case([](NVVM::ThreadIdXOp) { return VMOE_EMU_TID_X; })
      .Case([](NVVM::ThreadIdYOp) { return VMOE_EMU_TID_Y; })
      .Case([](NVVM::ThreadIdZOp) { return VMOE_EMU_TID_Z; })
      .Case([](NVVM::BlockDimXOp) { return VMOE_EMU_NTID_X; })
      .Case([](NVVM::BlockDimYOp) { return VMOE_EMU_NTID_Y; })
      .Case([](NVVM::BlockDimZOp) { return VMOE_EMU_NTID_Z; })
      .Case([](NVVM::BlockIdXOp) { return VMOE_EMU_CTAID_X; })
      .Case([](NVVM::BlockIdYOp) { return VMOE_EMU_CTAID_Y; })
      .Case([](NVVM::BlockIdZOp) { return VMOE_EMU_CTAID_Z; })
      .Case([](NVVM::GridDimXOp) { return VMOE_EMU_NCTAID_X; })
      .Case([](NVVM::GridDimYOp) { return VMOE_EMU_NCTAID_Y; })
      .Case([](NVVM::GridDimZOp) { return VMOE_EMU_NCTAID_Z; })
      .Case([](NVVM::LaneIdOp) { return VMOE_EMU_LANEID; })
      .Case([](NVVM::WarpSizeOp) { return VMOE_EMU_WARPSIZE; })
      .Default([](Operation *) { return -1; });
}

/// Replaces one NVVM op by emulator calls; fails (with an error) for an op
/// without an emulation.
LogicalResult emulate(Operation *op, EmulatorCalls &calls) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  Type i32 = calls.i32(), voidType = calls.voidType();
  auto c32 = [&](int64_t v) { return calls.constant(b, loc, i32, v); };

  if (int32_t reg = specialRegister(op); reg >= 0) {
    Value v = calls.call(b, loc, "__vmoe_emu_sreg", i32, {c32(reg)});
    Type type = op->getResult(0).getType();
    if (type != i32)
      v = LLVM::SExtOp::create(b, loc, type, v);
    op->getResult(0).replaceAllUsesWith(v);
    op->erase();
    return success();
  }
  if (auto barrier = dyn_cast<NVVM::BarrierOp>(op)) {
    if (barrier->getNumOperands() != 0 || barrier->getNumResults() != 0)
      return op->emitOpError("with operands has no emulation");
    calls.call(b, loc, "__vmoe_emu_barrier", voidType, {});
    op->erase();
    return success();
  }
  if (isa<NVVM::Barrier0Op>(op)) {
    calls.call(b, loc, "__vmoe_emu_barrier", voidType, {});
    op->erase();
    return success();
  }
  if (auto mma = dyn_cast<NVVM::MmaOp>(op)) {
    NVVM::MMAShapeAttr shape = mma.getShape();
    std::optional<NVVM::MMATypes> a = mma.getMultiplicandAPtxType();
    int32_t kind = -1;
    if (shape.getM() == 16 && shape.getN() == 8 && shape.getK() == 8 &&
        a == NVVM::MMATypes::tf32)
      kind = VMOE_EMU_MMA_M16N8K8_TF32;
    else if (shape.getM() == 16 && shape.getN() == 8 && shape.getK() == 16 &&
             a == NVVM::MMATypes::bf16)
      kind = VMOE_EMU_MMA_M16N8K16_BF16;
    else if (shape.getM() == 16 && shape.getN() == 8 && shape.getK() == 16 &&
             a == NVVM::MMATypes::f16)
      kind = VMOE_EMU_MMA_M16N8K16_F16;
    if (kind < 0 || mma.getLayoutA() != NVVM::MMALayout::row ||
        mma.getLayoutB() != NVVM::MMALayout::col ||
        mma.getOperandA().size() != 4 || mma.getOperandB().size() != 2 ||
        mma.getOperandC().size() != 4 ||
        !llvm::all_of(mma.getOperandC().getTypes(),
                      [](Type t) { return t.isF32(); }))
      return op->emitOpError("has no emulation (emulated: row.col m16n8k8 "
                             "tf32, m16n8k16 bf16/f16, f32 accumulators)");
    Value aArray = storeWords(b, loc, op, mma.getOperandA());
    Value bArray = storeWords(b, loc, op, mma.getOperandB());
    Type f32 = b.getF32Type();
    Value cArray = entryAlloca(b, op, f32, 4);
    for (auto [i, v] : llvm::enumerate(mma.getOperandC())) {
      Value slot = LLVM::GEPOp::create(
          b, loc, cArray.getType(), f32, cArray,
          ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
      LLVM::StoreOp::create(b, loc, v, slot);
    }
    Value dArray = entryAlloca(b, op, f32, 4);
    calls.call(b, loc, "__vmoe_emu_mma", voidType,
               {c32(kind), aArray, bArray, cArray, dArray});
    Value d = loadStruct(b, loc, dArray, f32, mma.getRes().getType(), 4);
    mma.getRes().replaceAllUsesWith(d);
    op->erase();
    return success();
  }
  if (auto ld = dyn_cast<NVVM::LdMatrixOp>(op)) {
    NVVM::LdStMatrixShapeAttr shape = ld.getShape();
    if (ld.getEltType() != NVVM::LdStMatrixEltType::B16 ||
        shape.getM() != 8 || shape.getN() != 8)
      return op->emitOpError("has no emulation (emulated: m8n8 b16)");
    int64_t num = ld.getNum();
    Value out = entryAlloca(b, op, i32, num);
    int64_t trans = ld.getLayout() == NVVM::MMALayout::col ? 1 : 0;
    calls.call(b, loc, "__vmoe_emu_ldmatrix", voidType,
               {c32(num), c32(trans), ld.getPtr(), out});
    Value v = loadStruct(b, loc, out, i32, ld.getRes().getType(), num);
    ld.getRes().replaceAllUsesWith(v);
    op->erase();
    return success();
  }
  if (auto cp = dyn_cast<NVVM::CpAsyncOp>(op)) {
    int64_t size = cp.getSize();
    Value sourceSize = cp.getCpSize();
    if (!sourceSize)
      sourceSize = c32(size);
    else if (sourceSize.getType() != i32)
      sourceSize = LLVM::TruncOp::create(b, loc, i32, sourceSize);
    calls.call(b, loc, "__vmoe_emu_cp_async", voidType,
               {cp.getDst(), cp.getSrc(), c32(size), sourceSize});
    op->erase();
    return success();
  }
  if (isa<NVVM::CpAsyncCommitGroupOp>(op)) {
    calls.call(b, loc, "__vmoe_emu_cp_async_commit", voidType, {});
    op->erase();
    return success();
  }
  if (auto wait = dyn_cast<NVVM::CpAsyncWaitGroupOp>(op)) {
    calls.call(b, loc, "__vmoe_emu_cp_async_wait", voidType,
               {c32(wait.getN())});
    op->erase();
    return success();
  }
  if (auto shfl = dyn_cast<NVVM::ShflOp>(op)) {
    Value value = shfl.getVal();
    Type valueType = value.getType();
    if (!valueType.isInteger(32) && !valueType.isF32())
      return op->emitOpError("on ") << valueType << " has no emulation";
    if (valueType.isF32())
      value = LLVM::BitcastOp::create(b, loc, i32, value);
    Value valid = entryAlloca(b, op, b.getI8Type(), 1);
    Value result = calls.call(
        b, loc, "__vmoe_emu_shfl", i32,
        {c32(static_cast<int64_t>(shfl.getKind())), shfl.getThreadMask(),
         value, shfl.getOffset(), shfl.getMaskAndClamp(), valid});
    if (valueType.isF32())
      result = LLVM::BitcastOp::create(b, loc, valueType, result);
    Value replacement = result;
    if (shfl.getReturnValueAndIsValid()) {
      Value flag = LLVM::LoadOp::create(b, loc, b.getI8Type(), valid);
      flag = LLVM::TruncOp::create(b, loc, b.getI1Type(), flag);
      Type type = shfl.getRes().getType();
      replacement = LLVM::PoisonOp::create(b, loc, type);
      replacement = LLVM::InsertValueOp::create(b, loc, replacement, result,
                                                ArrayRef<int64_t>{0});
      replacement = LLVM::InsertValueOp::create(b, loc, replacement, flag,
                                                ArrayRef<int64_t>{1});
    }
    shfl.getRes().replaceAllUsesWith(replacement);
    op->erase();
    return success();
  }
  if (auto vote = dyn_cast<NVVM::VoteSyncOp>(op)) {
    Value predicate = LLVM::ZExtOp::create(b, loc, i32, vote.getPred());
    Value result = calls.call(
        b, loc, "__vmoe_emu_vote", i32,
        {c32(static_cast<int64_t>(vote.getKind())), vote.getMask(),
         predicate});
    Type type = vote.getRes().getType();
    if (type != i32)
      result = LLVM::TruncOp::create(b, loc, type, result);
    vote.getRes().replaceAllUsesWith(result);
    op->erase();
    return success();
  }
  return op->emitOpError("has no emulation in vmoe-gpu-emulate-kernels");
}

/// Every pointer type in `root` (results, block arguments, attributes,
/// nested) becomes a pointer of address space 0.
void toHostPointers(Operation *root) {
  AttrTypeReplacer replacer;
  replacer.addReplacement([](LLVM::LLVMPointerType type) -> Type {
    return LLVM::LLVMPointerType::get(type.getContext());
  });
  replacer.recursivelyReplaceElementsIn(root, /*replaceAttrs=*/true,
                                        /*replaceLocs=*/false,
                                        /*replaceTypes=*/true);
  root->walk([](Operation *op) {
    if (auto global = dyn_cast<LLVM::GlobalOp>(op))
      global.setAddrSpace(0);
  });
  // Casts between address spaces are now no-ops.
  SmallVector<LLVM::AddrSpaceCastOp> casts;
  root->walk([&](LLVM::AddrSpaceCastOp cast) { casts.push_back(cast); });
  for (LLVM::AddrSpaceCastOp cast : casts) {
    cast.getResult().replaceAllUsesWith(cast.getArg());
    cast.erase();
  }
}

/// Drops the NVVM and GPU attributes of a function (kernel calling
/// convention, launch bounds) that the host translation must not see.
void dropDeviceAttributes(LLVM::LLVMFuncOp func) {
  SmallVector<StringAttr> names;
  for (NamedAttribute attr : func->getDiscardableAttrs())
    if (attr.getName().strref().starts_with("nvvm.") ||
        attr.getName().strref().starts_with("gpu."))
      names.push_back(attr.getName());
  for (StringAttr name : names)
    func->removeAttr(name);
  func.setCConv(LLVM::CConv::C);
}

/// A NUL-terminated string constant in the host module; returns its
/// address.
Value stringConstant(OpBuilder &b, Location loc, ModuleOp host,
                     StringRef symbol, StringRef text) {
  std::string data = (text + Twine('\0')).str();
  auto type = LLVM::LLVMArrayType::get(b.getI8Type(), data.size());
  if (!host.lookupSymbol(symbol)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(host.getBody());
    LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true,
                           LLVM::Linkage::Internal, symbol,
                           b.getStringAttr(data));
  }
  return LLVM::AddressOfOp::create(b, loc, LLVM::LLVMPointerType::get(
                                               b.getContext()),
                                   symbol);
}

/// Emulation of one gpu.module.
struct ModuleEmulation {
  ModuleOp host;
  gpu::GPUModuleOp module;
  EmulatorCalls &calls;
  /// Registration calls go into this function (the constructor).
  LLVM::LLVMFuncOp ctor;

  std::string prefix() { return ("__vmoe_emu_" + module.getName() + "_").str(); }

  LogicalResult run() {
    MLIRContext *ctx = host.getContext();
    std::string text;
    {
      llvm::raw_string_ostream os(text);
      module->print(os);
    }
    std::string token = (module.getName() + ":" +
                         llvm::utohexstr(llvm::xxh3_64bits(text)))
                            .str();

    // Definitions move under a prefixed name; declarations (libdevice's
    // __nv_* functions) stay external and unique in the host module.
    OpBuilder b(ctx);
    b.setInsertionPoint(module);
    SmallVector<std::pair<StringAttr, StringAttr>> renames;
    SmallVector<Operation *> moved;
    SmallVector<LLVM::LLVMFuncOp> kernels;
    for (Operation &op : llvm::make_early_inc_range(
             module.getBodyRegion().front())) {
      auto symbol = dyn_cast<SymbolOpInterface>(&op);
      if (!symbol || !isa<LLVM::LLVMFuncOp, LLVM::GlobalOp>(&op))
        return op.emitOpError("in a gpu.module has no emulation");
      auto func = dyn_cast<LLVM::LLVMFuncOp>(&op);
      if (func && func.isExternal()) {
        if (Operation *existing = host.lookupSymbol(func.getSymName())) {
          auto other = dyn_cast<LLVM::LLVMFuncOp>(existing);
          if (!other || other.getFunctionType() != func.getFunctionType())
            return func.emitOpError("declared differently in host code");
          continue;
        }
      } else {
        StringAttr old = symbol.getNameAttr();
        StringAttr renamed = StringAttr::get(ctx, prefix() + old.strref());
        renames.push_back({old, renamed});
      }
      Operation *clone = b.clone(op);
      moved.push_back(clone);
      if (func && !func.isExternal() &&
          (func->hasAttr("nvvm.kernel") ||
           func->hasAttr(gpu::GPUDialect::getKernelFuncAttrName())))
        kernels.push_back(cast<LLVM::LLVMFuncOp>(clone));
    }
    for (Operation *op : moved) {
      for (auto [old, renamed] : renames)
        if (failed(SymbolTable::replaceAllSymbolUses(old, renamed, op)))
          return op->emitOpError("cannot rename its symbol uses");
      if (auto symbol = dyn_cast<SymbolOpInterface>(op)) {
        for (auto [old, renamed] : renames)
          if (symbol.getNameAttr() == old)
            symbol.setName(renamed);
      }
      if (auto func = dyn_cast<LLVM::LLVMFuncOp>(op)) {
        if (!func.isExternal()) {
          func.setLinkage(LLVM::Linkage::Internal);
          dropDeviceAttributes(func);
        }
      }
      toHostPointers(op);
      SmallVector<Operation *> device;
      op->walk([&](Operation *inner) {
        if (isa<NVVM::NVVMDialect>(inner->getDialect()))
          device.push_back(inner);
        else if (isa<LLVM::InlineAsmOp>(inner))
          device.push_back(inner);
      });
      for (Operation *inner : device) {
        if (isa<LLVM::InlineAsmOp>(inner))
          return inner->emitOpError(
              "(inline PTX) has no emulation in vmoe-gpu-emulate-kernels");
        if (failed(emulate(inner, calls)))
          return failure();
      }
    }

    if (failed(placeSharedVariables(b, moved)))
      return failure();

    // Registration: entries of the kernels and the shared variables.
    Location loc = module.getLoc();
    b.setInsertionPoint(ctor.getBody().front().getTerminator());
    Value tokenString = stringConstant(b, loc, host, prefix() + "token",
                                       token);
    for (LLVM::LLVMFuncOp kernel : kernels) {
      std::string name = kernel.getSymName().drop_front(prefix().size()).str();
      LLVM::LLVMFuncOp entry = buildEntry(kernel, name);
      Value nameString =
          stringConstant(b, loc, host, prefix() + name + "_name", name);
      Value entryAddress = LLVM::AddressOfOp::create(
          b, loc, calls.ptr(), entry.getSymName());
      calls.call(b, loc, "__vmoe_emu_register_kernel", calls.voidType(),
                 {tokenString, nameString, entryAddress});
    }
    for (const SharedPlacement &shared : placements) {
      Value address = sharedAddress(b, loc, shared);
      calls.call(b, loc, "__vmoe_emu_register_shared", calls.voidType(),
                 {tokenString, address,
                  calls.constant(b, loc, calls.i64(), shared.bytes)});
    }

    // The binary the host code loads: the token names the registration.
    b.setInsertionPoint(module);
    auto object = gpu::ObjectAttr::get(
        ctx, NVVM::NVVMTargetAttr::get(ctx), gpu::CompilationTarget::Fatbin,
        b.getStringAttr(VMOE_EMU_BINARY_PREFIX + token + std::string(1, '\0')),
        nullptr, nullptr);
    gpu::BinaryOp::create(b, loc, module.getName(), nullptr,
                          ArrayRef<Attribute>{object});
    module.erase();
    return success();
  }

  /// llvm.func internal @<kernel>_entry(%params: ptr): loads argument i
  /// through params[i] and calls the kernel.
  LLVM::LLVMFuncOp buildEntry(LLVM::LLVMFuncOp kernel, StringRef name) {
    OpBuilder b(kernel);
    b.setInsertionPointAfter(kernel);
    Location loc = kernel.getLoc();
    Type ptr = calls.ptr();
    auto entry = LLVM::LLVMFuncOp::create(
        b, loc, prefix() + name.str() + "_entry",
        LLVM::LLVMFunctionType::get(calls.voidType(), {ptr}),
        LLVM::Linkage::Internal);
    Block *body = entry.addEntryBlock(b);
    b.setInsertionPointToStart(body);
    SmallVector<Value> args;
    for (auto [i, type] :
         llvm::enumerate(kernel.getFunctionType().getParams())) {
      Value slot = LLVM::GEPOp::create(
          b, loc, ptr, ptr, body->getArgument(0),
          ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
      Value address = LLVM::LoadOp::create(b, loc, ptr, slot);
      args.push_back(LLVM::LoadOp::create(b, loc, type, address));
    }
    LLVM::CallOp::create(b, loc, kernel, args);
    LLVM::ReturnOp::create(b, loc, ValueRange{});
    return entry;
  }

  /// Where a shared variable lives on the host: `offset` bytes into the
  /// byte array `storage`.
  struct SharedPlacement {
    LLVM::GlobalOp storage;
    uint64_t offset, bytes;
  };
  SmallVector<SharedPlacement> placements;

  /// The address of a placed shared variable.
  Value sharedAddress(OpBuilder &b, Location loc, SharedPlacement shared) {
    Value base = LLVM::AddressOfOp::create(b, loc, calls.ptr(),
                                           shared.storage.getSymName());
    return LLVM::GEPOp::create(
        b, loc, calls.ptr(), b.getI8Type(), base,
        ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(shared.offset)});
  }

  /// Puts every shared variable (a non-constant global of the kernels) at
  /// an address aligned exactly as it is declared and no more: A bytes into
  /// a byte array aligned to 2A. So an access that needs more alignment
  /// than the variable declares (a 16-byte cp.async or ldmatrix on a
  /// `.align 4` buffer, which a GPU may or may not place well) fails here
  /// every time instead of depending on where the host linker put it.
  LogicalResult placeSharedVariables(OpBuilder &b,
                                     SmallVectorImpl<Operation *> &moved) {
    MLIRContext *ctx = host.getContext();
    for (Operation *&op : moved) {
      auto global = dyn_cast<LLVM::GlobalOp>(op);
      if (!global || global.getConstant())
        continue;
      uint64_t bytes = 0, scalar = 0;
      if (failed(sizeOf(global.getGlobalType(), bytes)) ||
          failed(scalarSize(global.getGlobalType(), scalar)))
        return global.emitOpError("has a type the emulator cannot size");
      uint64_t align = global.getAlignment().value_or(scalar);
      align = std::max<uint64_t>(align, 1);
      b.setInsertionPoint(global);
      auto storageType = LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8),
                                                  align + bytes);
      auto storage = LLVM::GlobalOp::create(
          b, global.getLoc(), storageType, /*isConstant=*/false,
          LLVM::Linkage::Internal, (global.getSymName() + "_storage").str(),
          Attribute(), /*alignment=*/2 * align);
      SharedPlacement placement{storage, align, bytes};
      StringRef name = global.getSymName();
      for (Operation *user : moved) {
        SmallVector<LLVM::AddressOfOp> uses;
        user->walk([&](LLVM::AddressOfOp address) {
          if (address.getGlobalName() == name)
            uses.push_back(address);
        });
        for (LLVM::AddressOfOp address : uses) {
          b.setInsertionPoint(address);
          address.getResult().replaceAllUsesWith(
              sharedAddress(b, address.getLoc(), placement));
          address.erase();
        }
      }
      placements.push_back(placement);
      global.erase();
      op = storage;
    }
    return success();
  }

  /// Bytes of the scalars of a shared variable's type.
  static LogicalResult scalarSize(Type type, uint64_t &bytes) {
    if (auto array = dyn_cast<LLVM::LLVMArrayType>(type))
      return scalarSize(array.getElementType(), bytes);
    if (type.isIntOrFloat()) {
      bytes = (type.getIntOrFloatBitWidth() + 7) / 8;
      return success();
    }
    return failure();
  }

  /// Bytes of a shared variable's type (arrays of scalars, nested).
  static LogicalResult sizeOf(Type type, uint64_t &bytes) {
    if (auto array = dyn_cast<LLVM::LLVMArrayType>(type)) {
      uint64_t element = 0;
      if (failed(sizeOf(array.getElementType(), element)))
        return failure();
      bytes = element * array.getNumElements();
      return success();
    }
    if (type.isIntOrFloat()) {
      bytes = (type.getIntOrFloatBitWidth() + 7) / 8;
      return success();
    }
    return failure();
  }
};

} // namespace

namespace mlir::vmoe {
namespace {

struct VMoEGPUEmulateKernelsPass
    : impl::VMoEGPUEmulateKernelsPassBase<VMoEGPUEmulateKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp host = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(host.getOps<gpu::GPUModuleOp>());
    if (modules.empty())
      return;
    EmulatorCalls calls(host);
    // One constructor registers every module, before the binaries' own
    // constructors (priority 123) load them.
    OpBuilder b(host.getContext());
    b.setInsertionPointToEnd(host.getBody());
    Location loc = host.getLoc();
    auto ctor = LLVM::LLVMFuncOp::create(
        b, loc, "__vmoe_emu_register_kernels",
        LLVM::LLVMFunctionType::get(calls.voidType(), {}),
        LLVM::Linkage::Internal);
    b.setInsertionPointToStart(ctor.addEntryBlock(b));
    LLVM::ReturnOp::create(b, loc, ValueRange{});
    for (gpu::GPUModuleOp module : modules) {
      ModuleEmulation emulation{host, module, calls, ctor, {}};
      if (failed(emulation.run()))
        return signalPassFailure();
    }
    b.setInsertionPointToEnd(host.getBody());
    LLVM::GlobalCtorsOp::create(
        b, loc, b.getArrayAttr({FlatSymbolRefAttr::get(ctor)}),
        b.getI32ArrayAttr({101}),
        b.getArrayAttr({LLVM::ZeroAttr::get(host.getContext())}));
  }
};

} // namespace
} // namespace mlir::vmoe
