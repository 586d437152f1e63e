//===- BF16Pairs.cpp - bf16 pair products of the CPU microkernel ----------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The dot form broadcasts A's pair word to every lane and bitcasts both
// operands to vector<2 x lanes x bf16>: lane i of the result adds the
// products of bf16 elements 2i and 2i + 1, i.e. of k even and odd. The
// shift form turns a bf16 into the f32 with the same bits in its high half:
// the even k (low half) by `shl 16`, the odd k (high half) by masking the
// low half off; then one fma per k, odd first: the order in which
// vdpbf16ps adds the two products, so that both forms give the same sums
// (but for vdpbf16ps flushing denormals).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Codegen/BF16Pairs.h"

#include "vmoe/Codegen/Microkernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/Matchers.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::vmoe;

/// The f32 values of the even (low half) and odd (high half) bf16 of
/// `words` (i32 or vector of i32).
static std::pair<Value, Value> widenPairs(OpBuilder &b, Location loc,
                                          Value words, Type f32Type) {
  Type type = words.getType();
  auto splat = [&](int64_t v) {
    TypedAttr attr = b.getI32IntegerAttr(static_cast<int32_t>(v));
    if (auto vector = dyn_cast<VectorType>(type))
      attr = DenseElementsAttr::get(vector, attr);
    return Value(arith::ConstantOp::create(b, loc, attr));
  };
  Value even = arith::ShLIOp::create(b, loc, words, splat(16));
  Value odd = arith::AndIOp::create(b, loc, words, splat(0xFFFF0000));
  return {arith::BitcastOp::create(b, loc, f32Type, even),
          arith::BitcastOp::create(b, loc, f32Type, odd)};
}

/// Transposes the L x L matrix whose rows are the 1-D vectors `rows`. L a
/// power of 2: log2(L) rounds of two-source shuffles; the round of size s
/// swaps, within every block of 2 s rows and 2 s columns, the upper-right
/// and lower-left s x s blocks (rows i and i + s exchange halves). With
/// L = 16, 64 shuffles; one scatter per row measured about 40 cycles on
/// Zen 4. Other L (vector widths no x86 target has): element by element.
static void transposeInRegisters(OpBuilder &b, Location loc,
                                 MutableArrayRef<Value> rows) {
  int64_t lanes = rows.size();
  if (!llvm::isPowerOf2_64(lanes)) {
    SmallVector<Value> columns;
    for (int64_t j = 0; j < lanes; ++j) {
      SmallVector<Value> elements;
      for (Value row : rows)
        elements.push_back(
            vector::ExtractOp::create(b, loc, row, ArrayRef<int64_t>{j}));
      columns.push_back(
          vector::FromElementsOp::create(b, loc, rows[0].getType(), elements));
    }
    llvm::copy(columns, rows.begin());
    return;
  }
  for (int64_t s = lanes / 2; s >= 1; s /= 2) {
    SmallVector<int64_t> upper, lower;
    for (int64_t c = 0; c < lanes; ++c) {
      int64_t block = c - c % (2 * s), t = c % (2 * s);
      upper.push_back(t < s ? c : lanes + block + t - s);
      lower.push_back(t < s ? block + s + t : lanes + c);
    }
    for (int64_t i = 0; i < lanes; ++i) {
      if (i % (2 * s) >= s)
        continue;
      Value top = rows[i], bottom = rows[i + s];
      if (top == bottom && matchPattern(top, m_Zero()))
        continue; // Rows past N: zero either way.
      rows[i] = vector::ShuffleOp::create(b, loc, top, bottom, upper);
      rows[i + s] = vector::ShuffleOp::create(b, loc, top, bottom, lower);
    }
  }
}

Value BF16PairProducts::roundToPairs(OpBuilder &b, Location loc,
                                     Value values) const {
  auto wordsType = VectorType::get({lanes}, b.getI32Type());
  if (dot) {
    Value halves = arith::TruncFOp::create(
        b, loc, VectorType::get({2 * lanes}, b.getBF16Type()), values);
    return vector::BitCastOp::create(b, loc, wordsType, halves);
  }
  // bits + 0x7fff + (bit 16 of bits), then the high half: round to nearest
  // even; a NaN keeps its high half with the quiet bit set.
  auto bitsType = VectorType::get({2 * lanes}, b.getI32Type());
  auto splat = [&](int32_t v) {
    return Value(arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(bitsType, b.getI32IntegerAttr(v))));
  };
  Value bits = arith::BitcastOp::create(b, loc, bitsType, values);
  Value high = arith::ShRUIOp::create(b, loc, bits, splat(16));
  Value lsb = arith::AndIOp::create(b, loc, high, splat(1));
  Value rounded = arith::ShRUIOp::create(
      b, loc,
      arith::AddIOp::create(b, loc, bits,
                            arith::AddIOp::create(b, loc, lsb, splat(0x7FFF))),
      splat(16));
  Value isNaN =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, values, values);
  Value quiet = arith::OrIOp::create(b, loc, high, splat(0x40));
  Value halves = arith::TruncIOp::create(
      b, loc, VectorType::get({2 * lanes}, b.getI16Type()),
      arith::SelectOp::create(b, loc, isNaN, quiet, rounded));
  return vector::BitCastOp::create(b, loc, wordsType, halves);
}

Value BF16PairProducts::valuesToPairs(OpBuilder &b, Location loc,
                                      Value values) const {
  auto type = cast<VectorType>(values.getType());
  if (!type.getElementType().isBF16())
    return roundToPairs(b, loc, values);
  return vector::BitCastOp::create(
      b, loc, VectorType::get({type.getNumElements() / 2}, b.getI32Type()),
      values);
}

Value BF16PairProducts::loadPairWords(OpBuilder &b, Location loc, Value source,
                                      ValueRange indices, Value mask) const {
  Type element = cast<MemRefType>(source.getType()).getElementType();
  return valuesToPairs(b, loc,
                       loadVector(b, loc, VectorType::get({2 * lanes}, element),
                                  source, indices, mask));
}

void BF16PairProducts::roundRowsToPairs(
    OpBuilder &b, Location loc, Value pairs, Value rows, Value k, Value source,
    function_ref<SmallVector<Value>(OpBuilder &, Location, Value)> prefix)
    const {
  auto index = [&](int64_t v) {
    return Value(arith::ConstantIndexOp::create(b, loc, v));
  };
  Value two = index(2);
  Value words = arith::CeilDivUIOp::create(b, loc, k, two);
  auto maskType = [&](int64_t n) {
    return VectorType::get({n}, b.getI1Type());
  };
  auto forLoop = [&](OpBuilder &b, Value ub, Value step,
                     function_ref<void(OpBuilder &, Location, Value)> body) {
    scf::ForOp::create(b, loc, index(0), ub, step, ValueRange{},
                       [&](OpBuilder &b, Location loc, Value iv, ValueRange) {
                         body(b, loc, iv);
                         scf::YieldOp::create(b, loc);
                       });
  };
  forLoop(b, rows, index(1), [&](OpBuilder &b, Location loc, Value row) {
    SmallVector<Value> base = prefix(b, loc, row);
    forLoop(b, words, index(lanes), [&](OpBuilder &b, Location loc, Value j) {
      Value first = arith::MulIOp::create(b, loc, j, two);
      Value left = arith::SubIOp::create(b, loc, k, first);
      Value valuesMask = vector::CreateMaskOp::create(
          b, loc, maskType(2 * lanes), ValueRange{left});
      Value wordsMask = vector::CreateMaskOp::create(
          b, loc, maskType(lanes),
          ValueRange{arith::CeilDivUIOp::create(b, loc, left, two)});
      SmallVector<Value> at = base;
      at.push_back(first);
      // Lanes past k read 0: an odd k's last high half.
      storeVector(b, loc, loadPairWords(b, loc, source, at, valuesMask), pairs,
                  {row, j}, wordsMask);
    });
  });
}

Value BF16PairProducts::packPanels(
    OpBuilder &b, Location loc, Value source, int64_t panels, int64_t k,
    int64_t n, bool transposed,
    function_ref<SmallVector<Value>(OpBuilder &, Location, Value, Value)>
        indices) const {
  auto index = [&](int64_t v) {
    return Value(arith::ConstantIndexOp::create(b, loc, v));
  };
  int64_t words = (k + 1) / 2;
  Value packed = memref::AllocaOp::create(
      b, loc, MemRefType::get({panels, words, lanes}, b.getI32Type()),
      b.getI64IntegerAttr(64));
  Value nValue = index(n), kValue = index(k);
  auto forLoop = [&](OpBuilder &b, Location loc, int64_t ub,
                     function_ref<void(OpBuilder &, Location, Value)> body) {
    scf::ForOp::create(b, loc, index(0), index(ub), index(1), ValueRange{},
                       [&](OpBuilder &b, Location loc, Value iv, ValueRange) {
                         body(b, loc, iv);
                         scf::YieldOp::create(b, loc);
                       });
  };
  if (transposed) {
    // B's columns are contiguous along k: 2 L values of one column round
    // to L words (consecutive k pairs); the words of the L columns of a
    // panel, an L x L tile transposed in registers, are L word rows of the
    // panel. k past K reads 0. The panels of N's full multiples of L run
    // in a loop; the rest, unrolled, hold zeros past N.
    auto wordsType = VectorType::get({lanes}, b.getI32Type());
    Value zeroWords =
        arith::ConstantOp::create(b, loc, wordsType, b.getZeroAttr(wordsType));
    int64_t fullPanels = std::min(panels, n / lanes);
    // Panel p; `columns` of its L columns are inside N.
    auto panel = [&](OpBuilder &b, Location loc, Value p, int64_t columns) {
      Value n0 = arith::MulIOp::create(b, loc, p, index(lanes));
      for (int64_t w0 = 0; w0 < words; w0 += lanes) {
        int64_t k0 = 2 * w0;
        Value kMask;
        if (k - k0 < 2 * lanes)
          kMask = vector::CreateMaskOp::create(
              b, loc, VectorType::get({2 * lanes}, b.getI1Type()),
              ValueRange{index(k - k0)});
        SmallVector<Value> rows(lanes, zeroWords);
        for (int64_t i = 0; i < columns; ++i) {
          Value column = arith::AddIOp::create(b, loc, n0, index(i));
          rows[i] = loadPairWords(b, loc, source,
                                  indices(b, loc, index(k0), column), kMask);
        }
        transposeInRegisters(b, loc, rows);
        for (int64_t w = w0; w < std::min(w0 + lanes, words); ++w)
          vector::StoreOp::create(b, loc, rows[w - w0], packed,
                                  ValueRange{p, index(w), index(0)});
      }
    };
    forLoop(b, loc, fullPanels, [&](OpBuilder &b, Location loc, Value p) {
      panel(b, loc, p, lanes);
    });
    for (int64_t p = fullPanels; p < panels; ++p)
      panel(b, loc, index(p), std::clamp<int64_t>(n - p * lanes, 0, lanes));
    return packed;
  }
  // Two rows of B are read contiguously, interleaved and rounded: per word
  // row, the panels in turn, so that each row of B is read once, from
  // start to end.
  Type element = cast<MemRefType>(source.getType()).getElementType();
  auto rowType = VectorType::get({lanes}, element);
  Value zeros =
      arith::ConstantOp::create(b, loc, rowType, b.getZeroAttr(rowType));
  SmallVector<int64_t> interleave;
  for (int64_t i = 0; i < lanes; ++i)
    interleave.append({i, lanes + i});
  forLoop(b, loc, words, [&](OpBuilder &b, Location loc, Value j) {
    Value even = arith::MulIOp::create(b, loc, j, index(2));
    Value odd = arith::AddIOp::create(b, loc, even, index(1));
    Value hasOdd =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, odd, kValue);
    Value oddOrEven = arith::SelectOp::create(b, loc, hasOdd, odd, even);
    forLoop(b, loc, panels, [&](OpBuilder &b, Location loc, Value p) {
      Value n0 = arith::MulIOp::create(b, loc, p, index(lanes));
      Value columns = vector::CreateMaskOp::create(
          b, loc, VectorType::get({lanes}, b.getI1Type()),
          ValueRange{arith::SubIOp::create(b, loc, nValue, n0)});
      auto row = [&](Value kk) {
        return loadVector(b, loc, rowType, source, indices(b, loc, kk, n0),
                          columns);
      };
      Value oddRow =
          arith::SelectOp::create(b, loc, hasOdd, row(oddOrEven), zeros);
      Value values =
          vector::ShuffleOp::create(b, loc, row(even), oddRow, interleave);
      vector::StoreOp::create(b, loc, valuesToPairs(b, loc, values), packed,
                              ValueRange{p, j, index(0)});
    });
  });
  return packed;
}

SmallVector<Value, 2> BF16PairProducts::prepareB(OpBuilder &b, Location loc,
                                                 Value pairs) const {
  if (dot)
    return {vector::BitCastOp::create(
        b, loc, VectorType::get({2 * lanes}, b.getBF16Type()), pairs)};
  auto [even, odd] =
      widenPairs(b, loc, pairs, VectorType::get({lanes}, b.getF32Type()));
  return {even, odd};
}

SmallVector<Value, 2> BF16PairProducts::prepareA(OpBuilder &b, Location loc,
                                                 Value pair) const {
  if (dot) {
    Value words = vector::BroadcastOp::create(
        b, loc, VectorType::get({lanes}, b.getI32Type()), pair);
    return {vector::BitCastOp::create(
        b, loc, VectorType::get({2 * lanes}, b.getBF16Type()), words)};
  }
  auto [even, odd] = widenPairs(b, loc, pair, b.getF32Type());
  auto vectorType = VectorType::get({lanes}, b.getF32Type());
  return {vector::BroadcastOp::create(b, loc, vectorType, even),
          vector::BroadcastOp::create(b, loc, vectorType, odd)};
}

Value BF16PairProducts::update(OpBuilder &b, Location loc, Value acc,
                               ArrayRef<Value> a,
                               ArrayRef<Value> bOperands) const {
  if (dot)
    return x86vector::DotBF16Op::create(b, loc, acc.getType(), acc, a[0],
                                        bOperands[0]);
  Value odd = vector::FMAOp::create(b, loc, a[1], bOperands[1], acc);
  return vector::FMAOp::create(b, loc, a[0], bOperands[0], odd);
}
