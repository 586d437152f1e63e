//===- BF16PairContraction.cpp - Contractions of bf16 pair panels ---------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The body is recognized op by op from its yield (constants may have been
// hoisted out of it), so that vmoe-vectorize-contractions replaces only
// contractions whose values it computes.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Codegen/BF16PairContraction.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::vmoe;

/// The bits of the high half of a pair word, and the shift of its low half.
static constexpr uint32_t kHighHalf = 0xFFFF0000u;
static constexpr int64_t kHalfShift = 16;

Value mlir::vmoe::widenPairHalf(OpBuilder &b, Location loc, Value word,
                                Value odd) {
  Type i32 = b.getI32Type();
  Value bits = arith::BitcastOp::create(b, loc, i32, word);
  Value high = arith::AndIOp::create(
      b, loc, bits,
      arith::ConstantIntOp::create(b, loc, i32,
                                   static_cast<int32_t>(kHighHalf)));
  Value low = arith::ShLIOp::create(
      b, loc, bits, arith::ConstantIntOp::create(b, loc, i32, kHalfShift));
  Value half = arith::SelectOp::create(b, loc, odd, high, low);
  return arith::BitcastOp::create(b, loc, b.getF32Type(), half);
}

void mlir::vmoe::buildBF16PairContractionBody(OpBuilder &b, Location loc,
                                              Value a, Value word, Value acc,
                                              unsigned kDim) {
  Value k = linalg::IndexOp::create(b, loc, kDim);
  Value odd = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ne,
      arith::RemUIOp::create(b, loc, k,
                             arith::ConstantIndexOp::create(b, loc, 2)),
      arith::ConstantIndexOp::create(b, loc, 0));
  Value weight = widenPairHalf(b, loc, word, odd);
  // A stored as bf16 (a hidden its producer rounded) is only widened.
  Value rounded = arith::ExtFOp::create(
      b, loc, b.getF32Type(),
      a.getType().isBF16()
          ? a
          : Value(arith::TruncFOp::create(b, loc, b.getBF16Type(), a)),
      arith::FastMathFlagsAttr());
  Value product = arith::MulFOp::create(b, loc, rounded, weight);
  linalg::YieldOp::create(b, loc,
                          ValueRange{arith::AddFOp::create(b, loc, acc,
                                                           product)});
}

/// Whether `v` is the constant `expected` (an integer or index).
static bool isConstant(Value v, int64_t expected) {
  APInt value;
  return matchPattern(v, m_ConstantInt(&value)) &&
         value.getSExtValue() == expected;
}

/// Whether `v` is extf(truncf(a : bf16)) with the default rounding.
static bool isRoundedToBF16(Value v, Value a) {
  auto ext = v.getDefiningOp<arith::ExtFOp>();
  auto trunc = ext ? ext.getIn().getDefiningOp<arith::TruncFOp>() : nullptr;
  return trunc && trunc.getIn() == a && trunc.getType().isBF16() &&
         !trunc.getRoundingmodeAttr() && ext.getType().isF32();
}

/// Whether `v` is the f32 of `a`: extf(truncf(a) : bf16) for an f32 `a`,
/// extf(a) for a bf16 one.
static bool isBF16Operand(Value v, Value a) {
  if (!a.getType().isBF16())
    return isRoundedToBF16(v, a);
  auto ext = v.getDefiningOp<arith::ExtFOp>();
  return ext && ext.getIn() == a && ext.getType().isF32();
}

/// Whether `odd` is `linalg.index kDim` mod 2 != 0.
static bool isOddK(Value odd, unsigned kDim) {
  auto cmp = odd.getDefiningOp<arith::CmpIOp>();
  if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::ne ||
      !isConstant(cmp.getRhs(), 0))
    return false;
  auto rem = cmp.getLhs().getDefiningOp<arith::RemUIOp>();
  if (!rem || !isConstant(rem.getRhs(), 2))
    return false;
  auto index = rem.getLhs().getDefiningOp<linalg::IndexOp>();
  return index && index.getDim() == kDim;
}

/// Whether `v` is widenPairHalf(word, k odd).
static bool isPairHalf(Value v, Value word, unsigned kDim) {
  auto toFloat = v.getDefiningOp<arith::BitcastOp>();
  auto select =
      toFloat ? toFloat.getIn().getDefiningOp<arith::SelectOp>() : nullptr;
  if (!select || !isOddK(select.getCondition(), kDim))
    return false;
  auto high = select.getTrueValue().getDefiningOp<arith::AndIOp>();
  auto low = select.getFalseValue().getDefiningOp<arith::ShLIOp>();
  if (!high || !low || !isConstant(high.getRhs(),
                                   static_cast<int32_t>(kHighHalf)) ||
      !isConstant(low.getRhs(), kHalfShift) || high.getLhs() != low.getLhs())
    return false;
  auto bits = high.getLhs().getDefiningOp<arith::BitcastOp>();
  return bits && bits.getIn() == word && bits.getType().isInteger(32);
}

bool mlir::vmoe::isBF16PairContractionBody(linalg::GenericOp op,
                                           unsigned aInput, unsigned wordInput,
                                           unsigned kDim) {
  Block &body = *op.getBlock();
  if (op.getNumDpsInits() != 1 || body.getNumArguments() <= aInput ||
      body.getNumArguments() <= wordInput)
    return false;
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getNumOperands() != 1)
    return false;
  Value a = body.getArgument(aInput), word = body.getArgument(wordInput);
  Value acc = body.getArgument(op.getNumDpsInputs());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != &body || add.getLhs() != acc)
    return false;
  auto mul = add.getRhs().getDefiningOp<arith::MulFOp>();
  return mul && isBF16Operand(mul.getLhs(), a) &&
         isPairHalf(mul.getRhs(), word, kDim);
}

/// extf(truncf(v) : bf16) with the default rounding.
static Value roundToBF16(OpBuilder &b, Location loc, Value v) {
  return arith::ExtFOp::create(
      b, loc, b.getF32Type(),
      arith::TruncFOp::create(b, loc, b.getBF16Type(), v),
      arith::FastMathFlagsAttr());
}

void mlir::vmoe::buildBF16RoundedContractionBody(OpBuilder &b, Location loc,
                                                 ValueRange args) {
  Value product = arith::MulFOp::create(b, loc, roundToBF16(b, loc, args[0]),
                                        roundToBF16(b, loc, args[1]));
  linalg::YieldOp::create(
      b, loc, ValueRange{arith::AddFOp::create(b, loc, args[2], product)});
}

bool mlir::vmoe::isBF16RoundedContractionBody(linalg::GenericOp op) {
  Block &body = *op.getBlock();
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return false;
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getNumOperands() != 1)
    return false;
  Value a = body.getArgument(0), bArg = body.getArgument(1);
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != &body || add.getLhs() != body.getArgument(2))
    return false;
  auto mul = add.getRhs().getDefiningOp<arith::MulFOp>();
  if (!mul)
    return false;
  return (isRoundedToBF16(mul.getLhs(), a) &&
          isRoundedToBF16(mul.getRhs(), bArg)) ||
         (isRoundedToBF16(mul.getLhs(), bArg) &&
          isRoundedToBF16(mul.getRhs(), a));
}
