//===- VMoEOps.cpp - vmoe operations ----------------------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Builders, verifiers and folders of the vmoe operations. Each diagnostic
// implements one rule of docs/Dialect.md (rule IDs in the op descriptions)
// and names the operand, the expected and the actual values.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Dialect/VMoE/IR/VMoE.h"

#include "vmoe/Dialect/VMoE/IR/Capacity.h"
#include "vmoe/Support/Limits.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <string>

using namespace mlir;
using namespace mlir::vmoe;

//===----------------------------------------------------------------------===//
// Shape helpers shared by the verifiers
//===----------------------------------------------------------------------===//

/// Formats a shape as `2x400x?` for diagnostics.
static std::string formatShape(ArrayRef<int64_t> shape) {
  std::string result;
  llvm::raw_string_ostream os(result);
  llvm::interleave(
      shape,
      [&](int64_t dim) {
        if (ShapedType::isDynamic(dim))
          os << '?';
        else
          os << dim;
      },
      [&] { os << 'x'; });
  return result;
}

/// True when two dimensions may be equal (either is dynamic, or they match).
static bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// Checks that `value` is a rank-`rank` tensor; `layout` names its dims.
static LogicalResult verifyRank(Operation *op, StringRef name, Value value,
                                int64_t rank, StringRef layout) {
  auto type = cast<ShapedType>(value.getType());
  if (type.getRank() == rank)
    return success();
  return op->emitOpError() << "'" << name << "' must have rank " << rank
                           << " (" << layout << "), got rank "
                           << type.getRank();
}

/// Checks that `value` has shape `expected` (dynamic dims match anything);
/// `layout` spells the expected dims symbolically, e.g. "G x S x E".
static LogicalResult verifyShape(Operation *op, StringRef name, Value value,
                                 ArrayRef<int64_t> expected,
                                 StringRef layout) {
  auto type = cast<ShapedType>(value.getType());
  if (failed(verifyRank(op, name, value, expected.size(), layout)))
    return failure();
  for (auto [actualDim, expectedDim] : llvm::zip_equal(type.getShape(), expected)) {
    if (dimsCompatible(actualDim, expectedDim))
      continue;
    return op->emitOpError()
           << "'" << name << "' must have shape " << formatShape(expected)
           << " (" << layout << "), got " << formatShape(type.getShape());
  }
  return success();
}

/// Dimension `i` of the tensor `value`.
static int64_t dimOf(Value value, unsigned i) {
  return cast<ShapedType>(value.getType()).getDimSize(i);
}

/// Maps the dialect enum to the dependency-free rounding of Capacity.h.
static ::vmoe::CapacityRounding toRounding(CapacityRule rule) {
  return rule == CapacityRule::ceil ? ::vmoe::CapacityRounding::Ceil
                                    : ::vmoe::CapacityRounding::Round;
}

/// The value of an optional f64 attribute.
static std::optional<double> toDouble(FloatAttr attr) {
  if (!attr)
    return std::nullopt;
  return attr.getValueAsDouble();
}

//===----------------------------------------------------------------------===//
// RouteOp
//===----------------------------------------------------------------------===//

void RouteOp::build(OpBuilder &builder, OperationState &state, Value x,
                    Value router, int64_t k, RouteOrder order,
                    bool normalize) {
  auto xType = cast<RankedTensorType>(x.getType());
  auto routerType = cast<RankedTensorType>(router.getType());
  int64_t g = xType.getDimSize(0), s = xType.getDimSize(1);
  Type elementType = xType.getElementType();
  auto gates =
      RankedTensorType::get({g, s, routerType.getDimSize(1)}, elementType);
  auto ids = RankedTensorType::get({g, s, k}, builder.getI32Type());
  auto weights = RankedTensorType::get({g, s, k}, elementType);
  build(builder, state, gates, ids, weights, x, router, /*noise=*/Value(),
        builder.getI64IntegerAttr(k), builder.getBoolAttr(normalize),
        RouteOrderAttr::get(builder.getContext(), order),
        /*noise_std=*/FloatAttr());
}

/// The router operands of vmoe.route and vmoe.router_losses: x
/// `G x S x D`, router `D x E` with the D of x, and `k <= E`.
static LogicalResult verifyRouterOperands(Operation *op, Value x,
                                          Value router, int64_t k) {
  if (failed(verifyRank(op, "x", x, 3, "G x S x D")) ||
      failed(verifyRank(op, "router", router, 2, "D x E")))
    return failure();
  int64_t d = dimOf(x, 2), e = dimOf(router, 1);
  if (!dimsCompatible(dimOf(router, 0), d))
    return op->emitOpError() << "'router' dim 0 (" << dimOf(router, 0)
                             << ") must equal the model width D of 'x' ("
                             << d << ")";
  if (!ShapedType::isDynamic(e) && k > e)
    return op->emitOpError() << "k (" << k
                             << ") must not exceed the number of experts E ("
                             << e << ")";
  return success();
}

/// The noisy gating of a training graph: the `noise` operand iff the
/// `noise_std` attribute, noise_std finite and >= 0 (> 0 when `positive`),
/// noise `G x S x E`.
static LogicalResult verifyRouterNoise(Operation *op, Value x, Value router,
                                       Value noise, FloatAttr noiseStdAttr,
                                       bool positive) {
  std::optional<double> noiseStd = toDouble(noiseStdAttr);
  if (static_cast<bool>(noise) != noiseStd.has_value())
    return op->emitOpError()
           << "the 'noise' operand and the 'noise_std' attribute must be "
              "given together (got "
           << (noise ? "noise" : "noise_std") << " only)";
  if (!noiseStd)
    return success();
  if (!std::isfinite(*noiseStd) || *noiseStd < 0 ||
      (positive && *noiseStd == 0))
    return op->emitOpError() << "noise_std must be finite and "
                             << (positive ? "> 0" : ">= 0") << ", got "
                             << ::vmoe::formatShortest(*noiseStd);
  return verifyShape(op, "noise", noise,
                     {dimOf(x, 0), dimOf(x, 1), dimOf(router, 1)},
                     "G x S x E");
}

LogicalResult RouteOp::verify() {
  Operation *op = getOperation();
  // route-C1, route-C2, route-C3 (k >= 1 is part of the attribute
  // constraint).
  auto k = static_cast<int64_t>(getK());
  if (failed(verifyRouterOperands(op, getX(), getRouter(), k)))
    return failure();
  int64_t g = dimOf(getX(), 0), s = dimOf(getX(), 1);
  int64_t e = dimOf(getRouter(), 1);
  // route-C4, route-C5.
  if (failed(verifyShape(op, "gates", getGates(), {g, s, e}, "G x S x E")) ||
      failed(verifyShape(op, "expert_ids", getExpertIds(), {g, s, k},
                         "G x S x k")) ||
      failed(verifyShape(op, "weights", getWeights(), {g, s, k}, "G x S x k")))
    return failure();
  // route-C8.
  return verifyRouterNoise(op, getX(), getRouter(), getNoise(),
                           getNoiseStdAttr(), /*positive=*/false);
}

//===----------------------------------------------------------------------===//
// BPRSortOp
//===----------------------------------------------------------------------===//

void BPRSortOp::build(OpBuilder &builder, OperationState &state, Value gates,
                      PriorityScore score, std::optional<int64_t> k) {
  auto gatesType = cast<RankedTensorType>(gates.getType());
  auto orderType = RankedTensorType::get(
      {gatesType.getDimSize(0), gatesType.getDimSize(1)},
      builder.getI32Type());
  build(builder, state, orderType, gates,
        PriorityScoreAttr::get(builder.getContext(), score),
        k ? builder.getI64IntegerAttr(*k) : IntegerAttr());
}

LogicalResult BPRSortOp::verify() {
  Operation *op = getOperation();
  // bpr_sort-C1, bpr_sort-C2.
  if (failed(verifyRank(op, "gates", getGates(), 3, "G x S x N")))
    return failure();
  int64_t g = dimOf(getGates(), 0), s = dimOf(getGates(), 1);
  int64_t n = dimOf(getGates(), 2);
  if (failed(verifyShape(op, "order", getOrder(), {g, s}, "G x S")))
    return failure();
  std::optional<uint64_t> k = getK();
  if (!k)
    return success();
  // bpr_sort-C4.
  if (getScore() != PriorityScore::sum_topk)
    return emitOpError() << "'k' is only used by score sum_topk, got score "
                         << stringifyPriorityScore(getScore());
  // bpr_sort-C3.
  auto kValue = static_cast<int64_t>(*k);
  if (kValue < 1 || (!ShapedType::isDynamic(n) && kValue > n))
    return emitOpError() << "k (" << kValue << ") must be in [1, " << n
                         << "] (gates dim 2)";
  return success();
}

//===----------------------------------------------------------------------===//
// CapacityOp
//===----------------------------------------------------------------------===//

/// A capacity ratio that may be a compile-time constant: finite, > 0 and
/// at most limits::kMaxCapacityRatio.
static bool isValidConstantRatio(double ratio) {
  return std::isfinite(ratio) && ratio > 0 &&
         ratio <= ::vmoe::limits::kMaxCapacityRatio;
}

LogicalResult CapacityOp::verify() {
  // capacity-C1.
  if (getK() > getNumExperts())
    return emitOpError() << "k (" << getK()
                         << ") must not exceed num_experts ("
                         << getNumExperts() << ")";
  // capacity-C2: a ratio known at compile time is checked here (it would
  // fold to a capacity of 0 silently). This reads the defining constant, the
  // one place a vmoe verifier looks past its own op.
  FloatAttr ratio;
  if (matchPattern(getCapacityRatio(), m_Constant(&ratio)) &&
      !isValidConstantRatio(ratio.getValueAsDouble()))
    return emitOpError() << "constant capacity_ratio must be a finite number "
                            "in (0, "
                         << ::vmoe::formatShortest(
                                ::vmoe::limits::kMaxCapacityRatio)
                         << "], got "
                         << ::vmoe::formatShortest(ratio.getValueAsDouble());
  return success();
}

OpFoldResult CapacityOp::fold(FoldAdaptor adaptor) {
  auto ratio = dyn_cast_if_present<FloatAttr>(adaptor.getCapacityRatio());
  // An invalid constant ratio stays, for the verifier to report.
  if (!ratio || !isValidConstantRatio(ratio.getValueAsDouble()))
    return {};
  int64_t b = ::vmoe::computeCapacity(
      static_cast<int64_t>(getK()), static_cast<int64_t>(getTokensPerGroup()),
      ratio.getValueAsDouble(), static_cast<int64_t>(getNumExperts()),
      toRounding(getCapacityRule()), static_cast<int64_t>(getMultipleOf()));
  b = std::clamp<int64_t>(b, 0, static_cast<int64_t>(getMaxCapacity()));
  return IntegerAttr::get(IndexType::get(getContext()), b);
}

//===----------------------------------------------------------------------===//
// DispatchOp
//===----------------------------------------------------------------------===//

int64_t DispatchOp::getNumExperts() { return dimOf(getBuffers(), 0); }

int64_t DispatchOp::getNumChoices() { return dimOf(getExpertIds(), 2); }

std::optional<int64_t> DispatchOp::getStaticCapacity() {
  if (std::optional<uint64_t> capacity = getCapacity())
    return static_cast<int64_t>(*capacity);
  std::optional<double> ratio = toDouble(getCapacityRatioAttr());
  int64_t s = dimOf(getX(), 1);
  if (!ratio || ShapedType::isDynamic(s) ||
      ShapedType::isDynamic(getNumChoices()))
    return std::nullopt;
  int64_t b = ::vmoe::computeCapacity(
      getNumChoices(), s, *ratio, getNumExperts(),
      toRounding(getCapacityRule()), static_cast<int64_t>(getMultipleOf()));
  if (b < 1)
    return std::nullopt;
  return b;
}

LogicalResult DispatchOp::verify() {
  Operation *op = getOperation();
  // dispatch-C1, dispatch-C2, dispatch-C3.
  if (failed(verifyRank(op, "x", getX(), 3, "G x S x D")))
    return failure();
  int64_t g = dimOf(getX(), 0), s = dimOf(getX(), 1), d = dimOf(getX(), 2);
  if (failed(verifyShape(op, "expert_ids", getExpertIds(),
                         {g, s, ShapedType::kDynamic}, "G x S x k")))
    return failure();
  int64_t k = getNumChoices();
  if (ShapedType::isDynamic(k))
    return emitOpError("'expert_ids' dim 2 (k) must be static");
  if (getOrder() &&
      failed(verifyShape(op, "order", getOrder(), {g, s}, "G x S")))
    return failure();
  // dispatch-C4.
  if (failed(verifyShape(op, "buffers", getBuffers(),
                         {ShapedType::kDynamic, g, ShapedType::kDynamic, d},
                         "E x G x B x D")))
    return failure();
  int64_t e = getNumExperts();
  if (ShapedType::isDynamic(e))
    return emitOpError("'buffers' dim 0 (E) must be static");
  // dispatch-C5.
  if (failed(verifyShape(op, "slots", getSlots(), {g, s, k}, "G x S x k")))
    return failure();
  // dispatch-C6.
  if (k > e)
    return emitOpError() << "k (" << k
                         << ") must not exceed the number of experts E (" << e
                         << ")";
  // dispatch-C7, dispatch-C8.
  std::optional<double> ratio = toDouble(getCapacityRatioAttr());
  std::optional<uint64_t> capacity = getCapacity();
  if (ratio && !(std::isfinite(*ratio) && *ratio > 0))
    return emitOpError() << "capacity_ratio must be positive and finite, got "
                         << ::vmoe::formatShortest(*ratio);
  if (!ratio && !capacity)
    return emitOpError("requires a 'capacity' or a 'capacity_ratio' attribute");
  auto multipleOf = static_cast<int64_t>(getMultipleOf());
  if (multipleOf < 1)
    return emitOpError() << "multiple_of must be >= 1, got " << multipleOf;
  // dispatch-C9.
  int64_t bDim = dimOf(getBuffers(), 2);
  if (capacity) {
    auto b = static_cast<int64_t>(*capacity);
    if (b < 1)
      return emitOpError() << "capacity must be >= 1, got " << b;
    if (!ShapedType::isDynamic(bDim) && bDim != b)
      return emitOpError() << "'buffers' dim 2 (" << bDim
                           << ") must equal capacity (" << b << ")";
    return success();
  }
  if (ShapedType::isDynamic(s))
    return success();
  double raw = ::vmoe::rawCapacity(k, s, *ratio, e);
  int64_t b = ::vmoe::roundCapacity(raw, toRounding(getCapacityRule()),
                                    multipleOf);
  if (b < 1)
    return emitOpError() << "capacity rounds to 0 ("
                         << ::vmoe::describeRawCapacity(k, s, *ratio, e)
                         << "); raise capacity_ratio";
  if (!ShapedType::isDynamic(bDim) && bDim != b)
    return emitOpError() << "'buffers' dim 2 (" << bDim
                         << ") must equal the sized capacity (" << b << " = "
                         << stringifyCapacityRule(getCapacityRule()) << "("
                         << k << "*" << s << "*" << ::vmoe::formatShortest(*ratio) << "/" << e
                         << "))";
  return success();
}

//===----------------------------------------------------------------------===//
// ExpertFFNOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertFFNOp::verify() {
  Operation *op = getOperation();
  // expert_ffn-C1 .. expert_ffn-C5.
  if (failed(verifyRank(op, "buffers", getBuffers(), 4, "E x G x B x D")) ||
      failed(verifyRank(op, "w1", getW1(), 3, "E x D x H")))
    return failure();
  int64_t e = dimOf(getBuffers(), 0), d = dimOf(getBuffers(), 3);
  int64_t h = dimOf(getW1(), 2);
  if (failed(verifyShape(op, "w1", getW1(), {e, d, h}, "E x D x H")) ||
      failed(verifyShape(op, "b1", getB1(), {e, h}, "E x H")) ||
      failed(verifyShape(op, "w2", getW2(), {e, h, d}, "E x H x D")) ||
      failed(verifyShape(op, "b2", getB2(), {e, d}, "E x D")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// CombineOp
//===----------------------------------------------------------------------===//

LogicalResult CombineOp::verify() {
  Operation *op = getOperation();
  // combine-C1, combine-C2.
  if (failed(verifyRank(op, "expert_outputs", getExpertOutputs(), 4,
                        "E x G x B x D")))
    return failure();
  int64_t e = dimOf(getExpertOutputs(), 0), g = dimOf(getExpertOutputs(), 1);
  int64_t d = dimOf(getExpertOutputs(), 3);
  if (failed(verifyShape(op, "expert_ids", getExpertIds(),
                         {g, ShapedType::kDynamic, ShapedType::kDynamic},
                         "G x S x k")))
    return failure();
  int64_t s = dimOf(getExpertIds(), 1), k = dimOf(getExpertIds(), 2);
  // combine-C3.
  if (failed(verifyShape(op, "slots", getSlots(), {g, s, k}, "G x S x k")) ||
      failed(verifyShape(op, "weights", getWeights(), {g, s, k}, "G x S x k")))
    return failure();
  // combine-C4.
  if (!ShapedType::isDynamic(k) && !ShapedType::isDynamic(e) && k > e)
    return emitOpError() << "k (" << k
                         << ") must not exceed the number of experts E (" << e
                         << ")";
  // combine-C5.
  return verifyShape(op, "output", getOutput(), {g, s, d}, "G x S x D");
}

//===----------------------------------------------------------------------===//
// AssignSlotsOp
//===----------------------------------------------------------------------===//

LogicalResult AssignSlotsOp::verify() {
  Operation *op = getOperation();
  // assign_slots-C1, assign_slots-C2, assign_slots-C3.
  if (failed(verifyRank(op, "expert_ids", getExpertIds(), 3, "G x S x k")))
    return failure();
  int64_t g = dimOf(getExpertIds(), 0), s = dimOf(getExpertIds(), 1);
  int64_t k = dimOf(getExpertIds(), 2);
  if (getOrder() &&
      failed(verifyShape(op, "order", getOrder(), {g, s}, "G x S")))
    return failure();
  if (failed(verifyShape(op, "slots", getSlots(), {g, s, k}, "G x S x k")))
    return failure();
  // assign_slots-C4.
  if (failed(verifyShape(op, "slot_entries", getSlotEntries(),
                         {ShapedType::kDynamic, g, ShapedType::kDynamic},
                         "E x G x B")))
    return failure();
  int64_t e = dimOf(getSlotEntries(), 0), b = dimOf(getSlotEntries(), 2);
  if (ShapedType::isDynamic(e) || ShapedType::isDynamic(b) || b < 1)
    return emitOpError() << "'slot_entries' must have a static E and B >= 1, "
                            "got "
                         << formatShape(
                                cast<ShapedType>(getSlotEntries().getType())
                                    .getShape());
  if (!ShapedType::isDynamic(k) && k > e)
    return emitOpError() << "k (" << k
                         << ") must not exceed the number of experts E (" << e
                         << ")";
  // assign_slots-C5.
  return verifyShape(op, "fill", getFill(), {e, g}, "E x G");
}

/// Expert weights in the panel layout of vmoe.unpack_panels with width `l`:
/// w1 `E x ceil(H/L) x D x L`, b1 `E x H`, w2 `E x ceil(D/L) x H x L`,
/// b2 `E x D`, H from b1 (with bf16 pairs a panel row holds two k, so D
/// and H rows become ceil(D/2) and ceil(H/2)). fused_experts-C5,
/// expert_choice_experts-C6, soft_moe-C7.
static LogicalResult verifyPanelExpertWeights(Operation *op, Value w1, Value b1,
                                              Value w2, Value b2, int64_t e,
                                              int64_t d, int64_t l,
                                              bool bf16Pairs) {
  if (failed(verifyRank(op, "b1", b1, 2, "E x H")))
    return failure();
  int64_t h = dimOf(b1, 1);
  auto count = [l](int64_t n) {
    return ShapedType::isDynamic(n) ? n : (n + l - 1) / l;
  };
  auto rows = [bf16Pairs](int64_t k) {
    return !bf16Pairs || ShapedType::isDynamic(k) ? k : (k + 1) / 2;
  };
  if (failed(verifyShape(op, "w1", w1, {e, count(h), rows(d), l},
                         bf16Pairs ? "E x ceil(H/L) x ceil(D/2) x L"
                                   : "E x ceil(H/L) x D x L")) ||
      failed(verifyShape(op, "b1", b1, {e, h}, "E x H")) ||
      failed(verifyShape(op, "w2", w2, {e, count(d), rows(h), l},
                         bf16Pairs ? "E x ceil(D/L) x ceil(H/2) x L"
                                   : "E x ceil(D/L) x H x L")) ||
      failed(verifyShape(op, "b2", b2, {e, d}, "E x D")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// FusedExpertsOp
//===----------------------------------------------------------------------===//

LogicalResult FusedExpertsOp::verify() {
  Operation *op = getOperation();
  // fused_experts-C1, fused_experts-C2.
  if (failed(verifyRank(op, "x", getX(), 3, "G x S x D")) ||
      failed(verifyRank(op, "slots", getSlots(), 3, "G x S x k")))
    return failure();
  int64_t g = dimOf(getX(), 0), s = dimOf(getX(), 1), d = dimOf(getX(), 2);
  int64_t k = dimOf(getSlots(), 2);
  if (failed(verifyShape(op, "slots", getSlots(), {g, s, k}, "G x S x k")) ||
      failed(verifyShape(op, "weights", getWeights(), {g, s, k}, "G x S x k")))
    return failure();
  // fused_experts-C3.
  if (failed(verifyShape(op, "slot_entries", getSlotEntries(),
                         {ShapedType::kDynamic, g, ShapedType::kDynamic},
                         "E x G x B")))
    return failure();
  int64_t e = dimOf(getSlotEntries(), 0);
  if (failed(verifyShape(op, "fill", getFill(), {e, g}, "E x G")))
    return failure();
  // fused_experts-C7: bf16 pairs live in f32 panels only.
  bool bf16Pairs = getWeightStorage() == PanelStorage::bf16_pairs;
  if (bf16Pairs && !getWeightPanels())
    return emitOpError() << "'weight_storage' "
                         << stringifyPanelStorage(getWeightStorage())
                         << " needs 'weight_panels'";
  if (bf16Pairs && !getX().getType().getElementType().isF32())
    return emitOpError() << "'weight_storage' bf16_pairs needs f32 operands, "
                            "got "
                         << getX().getType().getElementType();
  // fused_experts-C5: the panel layout of vmoe.unpack_panels.
  if (std::optional<uint64_t> panels = getWeightPanels()) {
    if (getWUp())
      return emitOpError() << "'weight_panels' cannot be combined with a "
                              "gated expert (gated(%w_up))";
    return verifyPanelExpertWeights(op, getW1(), getB1(), getW2(), getB2(), e,
                                    d, static_cast<int64_t>(*panels),
                                    bf16Pairs);
  }
  // fused_experts-C4.
  if (failed(verifyRank(op, "w1", getW1(), 3, "E x D x H")))
    return failure();
  int64_t h = dimOf(getW1(), 2);
  if (failed(verifyShape(op, "w1", getW1(), {e, d, h}, "E x D x H")) ||
      failed(verifyShape(op, "b1", getB1(), {e, h}, "E x H")) ||
      failed(verifyShape(op, "w2", getW2(), {e, h, d}, "E x H x D")) ||
      failed(verifyShape(op, "b2", getB2(), {e, d}, "E x D")))
    return failure();
  // fused_experts-C6.
  if (!getWUp())
    return success();
  if (failed(verifyShape(op, "w_up", getWUp(), {e, d, h}, "E x D x H")))
    return failure();
  if (getElementTypeOrSelf(getWUp().getType()) !=
      getElementTypeOrSelf(getX().getType()))
    return emitOpError() << "'w_up' must have the element type of 'x' ("
                         << getElementTypeOrSelf(getX().getType()) << "), got "
                         << getElementTypeOrSelf(getWUp().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// FusedRouteOp
//===----------------------------------------------------------------------===//

LogicalResult FusedRouteOp::verify() {
  Operation *op = getOperation();
  // fused_route-C1.
  auto k = static_cast<int64_t>(getK());
  if (failed(verifyRouterOperands(op, getX(), getRouter(), k)))
    return failure();
  int64_t g = dimOf(getX(), 0), s = dimOf(getX(), 1);
  int64_t e = dimOf(getRouter(), 1);
  // fused_route-C2.
  if (failed(verifyShape(op, "expert_ids", getExpertIds(), {g, s, k},
                         "G x S x k")) ||
      failed(verifyShape(op, "weights", getWeights(), {g, s, k},
                         "G x S x k")) ||
      failed(verifyShape(op, "slots", getSlots(), {g, s, k}, "G x S x k")))
    return failure();
  // fused_route-C3.
  if (failed(verifyShape(op, "slot_entries", getSlotEntries(),
                         {e, g, ShapedType::kDynamic}, "E x G x B")))
    return failure();
  int64_t b = dimOf(getSlotEntries(), 2);
  if (ShapedType::isDynamic(b) || b < 1)
    return emitOpError() << "'slot_entries' must have a static B >= 1, got "
                         << formatShape(
                                cast<ShapedType>(getSlotEntries().getType())
                                    .getShape());
  if (failed(verifyShape(op, "fill", getFill(), {e, g}, "E x G")))
    return failure();
  // fused_route-C4.
  if (std::optional<uint64_t> scoreK = getScoreK()) {
    if (getPriority() != PriorityScore::sum_topk)
      return emitOpError("'score_k' is only used by priority sum_topk");
    auto value = static_cast<int64_t>(*scoreK);
    if (value < 1 || (!ShapedType::isDynamic(e) && value > e))
      return emitOpError() << "score_k (" << value << ") must be in [1, " << e
                           << "]";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Other MoE families (SPEC §8): expert choice routing and Soft MoE.
//===----------------------------------------------------------------------===//

/// Checks the expert MLP weights w1 `E x D x H`, b1 `E x H`, w2 `E x H x D`,
/// b2 `E x D` against the E and D of the caller.
static LogicalResult verifyExpertWeights(Operation *op, Value w1, Value b1,
                                         Value w2, Value b2, int64_t e,
                                         int64_t d,
                                         std::optional<uint64_t> panels) {
  if (panels)
    return verifyPanelExpertWeights(op, w1, b1, w2, b2, e, d,
                                    static_cast<int64_t>(*panels),
                                    /*bf16Pairs=*/false);
  if (failed(verifyRank(op, "w1", w1, 3, "E x D x H")))
    return failure();
  int64_t h = dimOf(w1, 2);
  if (failed(verifyShape(op, "w1", w1, {e, d, h}, "E x D x H")) ||
      failed(verifyShape(op, "b1", b1, {e, h}, "E x H")) ||
      failed(verifyShape(op, "w2", w2, {e, h, d}, "E x H x D")) ||
      failed(verifyShape(op, "b2", b2, {e, d}, "E x D")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// ExpertChoiceOp
//===----------------------------------------------------------------------===//

void ExpertChoiceOp::build(OpBuilder &builder, OperationState &state, Value x,
                           Value router, int64_t capacity,
                           Value runtimeCapacity, Value numValid) {
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t g = xType.getDimSize(0), s = xType.getDimSize(1);
  int64_t e = cast<RankedTensorType>(router.getType()).getDimSize(1);
  Type i32 = builder.getI32Type();
  build(builder, state,
        RankedTensorType::get({g, s, e}, xType.getElementType()),
        RankedTensorType::get({e, g, capacity}, i32),
        RankedTensorType::get({g, s, e}, i32), x, router, runtimeCapacity,
        numValid);
}

LogicalResult ExpertChoiceOp::verify() {
  Operation *op = getOperation();
  // expert_choice-C1 (k = 1: every expert takes tokens).
  if (failed(verifyRouterOperands(op, getX(), getRouter(), /*k=*/1)))
    return failure();
  int64_t g = dimOf(getX(), 0), s = dimOf(getX(), 1);
  int64_t e = dimOf(getRouter(), 1);
  // expert_choice-C2.
  if (failed(verifyShape(op, "gates", getGates(), {g, s, e}, "G x S x E")))
    return failure();
  // expert_choice-C3.
  if (failed(verifyShape(op, "token_ids", getTokenIds(),
                         {e, g, ShapedType::kDynamic}, "E x G x B")))
    return failure();
  int64_t tableE = dimOf(getTokenIds(), 0), b = dimOf(getTokenIds(), 2);
  if (ShapedType::isDynamic(tableE) || ShapedType::isDynamic(b) || b < 1)
    return emitOpError() << "'token_ids' must have a static E and B >= 1, "
                            "got "
                         << formatShape(
                                cast<ShapedType>(getTokenIds().getType())
                                    .getShape());
  // expert_choice-C4.
  return verifyShape(op, "slots", getSlots(), {g, s, tableE}, "G x S x E");
}

//===----------------------------------------------------------------------===//
// ExpertChoiceExpertsOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertChoiceExpertsOp::verify() {
  Operation *op = getOperation();
  // expert_choice_experts-C1.
  if (failed(verifyRank(op, "x", getX(), 3, "G x S x D")))
    return failure();
  int64_t g = dimOf(getX(), 0), s = dimOf(getX(), 1), d = dimOf(getX(), 2);
  // expert_choice_experts-C2.
  if (failed(verifyShape(op, "token_ids", getTokenIds(),
                         {ShapedType::kDynamic, g, ShapedType::kDynamic},
                         "E x G x B")))
    return failure();
  int64_t e = dimOf(getTokenIds(), 0);
  if (ShapedType::isDynamic(e))
    return emitOpError("'token_ids' dim 0 (E) must be static");
  // expert_choice_experts-C3.
  if (failed(verifyShape(op, "gates", getGates(), {g, s, e}, "G x S x E")) ||
      failed(verifyShape(op, "slots", getSlots(), {g, s, e}, "G x S x E")))
    return failure();
  // expert_choice_experts-C4, expert_choice_experts-C6.
  return verifyExpertWeights(op, getW1(), getB1(), getW2(), getB2(), e, d,
                             getWeightPanels());
}

//===----------------------------------------------------------------------===//
// SoftMoEOp
//===----------------------------------------------------------------------===//

LogicalResult SoftMoEOp::verify() {
  Operation *op = getOperation();
  // soft_moe-C1.
  if (failed(verifyRank(op, "x", getX(), 3, "G x S x D")))
    return failure();
  int64_t d = dimOf(getX(), 2);
  // soft_moe-C2.
  if (failed(verifyRank(op, "phi", getPhi(), 3, "D x E x P")))
    return failure();
  if (!dimsCompatible(dimOf(getPhi(), 0), d))
    return emitOpError() << "'phi' dim 0 (" << dimOf(getPhi(), 0)
                         << ") must equal the model width D of 'x' (" << d
                         << ")";
  // soft_moe-C4, soft_moe-C7 (soft_moe-C3 is the type constraint of
  // 'scale').
  return verifyExpertWeights(op, getW1(), getB1(), getW2(), getB2(),
                             dimOf(getPhi(), 1), d, getWeightPanels());
}

//===----------------------------------------------------------------------===//
// RouterLossesOp
//===----------------------------------------------------------------------===//

LogicalResult RouterLossesOp::verify() {
  Operation *op = getOperation();
  // router_losses-C1, router_losses-C2 (k >= 1 is part of the attribute
  // constraint).
  if (failed(verifyRouterOperands(op, getX(), getRouter(),
                                  static_cast<int64_t>(getK()))))
    return failure();
  // router_losses-C3.
  if (failed(verifyRouterNoise(op, getX(), getRouter(), getNoise(),
                               getNoiseStdAttr(), /*positive=*/true)))
    return failure();
  // router_losses-C5 (x and router: the AllElementTypesMatch trait).
  if (getNoise() && getElementTypeOrSelf(getNoise().getType()) !=
                        getElementTypeOrSelf(getX().getType()))
    return emitOpError() << "'noise' must have the element type of 'x' ("
                         << getElementTypeOrSelf(getX().getType())
                         << "), got "
                         << getElementTypeOrSelf(getNoise().getType());
  // router_losses-C4 (f32 is part of the result constraint).
  int64_t g = dimOf(getX(), 0);
  for (auto [name, value] :
       {std::pair<StringRef, Value>{"importance", getImportance()},
        {"load", getLoad()},
        {"gshard", getGshard()}})
    if (failed(verifyShape(op, name, value, {g}, "G")))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// ExpertSwiGLUOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertSwiGLUOp::verify() {
  Operation *op = getOperation();
  // expert_swiglu-C1.
  if (failed(verifyRank(op, "buffers", getBuffers(), 4, "E x G x B x D")))
    return failure();
  int64_t e = dimOf(getBuffers(), 0), d = dimOf(getBuffers(), 3);
  // expert_swiglu-C2.
  if (failed(verifyShape(op, "w_gate", getWGate(), {e, d, ShapedType::kDynamic},
                         "E x D x H")))
    return failure();
  int64_t h = dimOf(getWGate(), 2);
  if (failed(verifyShape(op, "w_up", getWUp(), {e, d, h}, "E x D x H")))
    return failure();
  // expert_swiglu-C3.
  return verifyShape(op, "w_down", getWDown(), {e, h, d}, "E x H x D");
}

#define GET_OP_CLASSES
#include "vmoe/Dialect/VMoE/IR/VMoEOps.cpp.inc"

//===----------------------------------------------------------------------===//
// UnpackPanelsOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  auto qType = getQ().getType(), kType = getK().getType(),
       vType = getV().getType();
  // attention-C1.
  for (auto [name, type] : {std::pair<StringRef, RankedTensorType>{"q", qType},
                            {"k", kType},
                            {"v", vType}}) {
    if (type.getRank() != 4)
      return emitOpError() << "'" << name
                           << "' must have rank 4 (N x T x H x dh), got rank "
                           << type.getRank();
    if (!type.getElementType().isF32() &&
        !(type.getElementType().isBF16() && getBf16Products()))
      return emitOpError() << "'" << name
                           << "' must be f32 (or bf16 with bf16_products), got "
                           << type.getElementType();
    if (!type.hasStaticShape())
      return emitOpError() << "'" << name << "' must have a static shape, got "
                           << formatShape(type.getShape());
  }
  // attention-C2.
  for (auto [actual, want] :
       llvm::zip_equal(vType.getShape(), kType.getShape()))
    if (!dimsCompatible(actual, want))
      return emitOpError() << "'v' must have the shape of 'k' "
                           << formatShape(kType.getShape()) << ", got "
                           << formatShape(vType.getShape());
  // attention-C3.
  for (unsigned d : {0u, 2u, 3u})
    if (!dimsCompatible(qType.getDimSize(d), kType.getDimSize(d)))
      return emitOpError() << "'q' must have the N, H and dh of 'k' "
                           << formatShape(kType.getShape()) << ", got "
                           << formatShape(qType.getShape());
  return success();
}

LogicalResult UnpackPanelsOp::verify() {
  auto panelsType = getPanels().getType();
  auto resultType = getResult().getType();
  int64_t rank = panelsType.getRank();
  // unpack_panels-C1.
  if (rank < 3)
    return emitOpError() << "'panels' must have rank >= 3 (... x P x K x L), "
                            "got rank "
                         << rank;
  if (resultType.getRank() != rank - 1)
    return emitOpError() << "result must have rank " << rank - 1
                         << " (... x K x N), got rank "
                         << resultType.getRank();
  ArrayRef<int64_t> in = panelsType.getShape(), out = resultType.getShape();
  // unpack_panels-C3: bf16 pairs, two k per f32 word.
  bool bf16Pairs = getStorage() == PanelStorage::bf16_pairs;
  if (bf16Pairs) {
    if (!panelsType.getElementType().isF32() ||
        !resultType.getElementType().isF32())
      return emitOpError() << "bf16_pairs storage needs f32 panels and "
                              "result, got "
                           << panelsType.getElementType();
    int64_t k = out[rank - 3], words = in[rank - 2];
    if (!ShapedType::isDynamic(k) && !ShapedType::isDynamic(words) &&
        words != (k + 1) / 2)
      return emitOpError() << "panels dim K (" << words
                           << ") must be ceil(K/2) = " << (k + 1) / 2
                           << " for the result's K (" << k
                           << ") with bf16_pairs storage";
  }
  SmallVector<int64_t> expected(in.begin(), in.end() - 3);
  // With bf16 pairs the result's K is checked above (C3).
  expected.push_back(bf16Pairs ? out[rank - 3] : in[rank - 2]);
  expected.push_back(out.back());
  for (auto [actual, want] : llvm::zip_equal(out, expected))
    if (!dimsCompatible(actual, want))
      return emitOpError() << "result must have shape "
                           << formatShape(expected) << " (... x K x N), got "
                           << formatShape(out);
  // unpack_panels-C2.
  int64_t p = in[rank - 3], l = in[rank - 1], n = out.back();
  if (ShapedType::isDynamic(p) || ShapedType::isDynamic(l) ||
      ShapedType::isDynamic(n))
    return success();
  if (n > p * l || n <= (p - 1) * l)
    return emitOpError() << "result dim N (" << n << ") must need exactly "
                         << p << " panels of width " << l
                         << ", i.e. lie in (" << (p - 1) * l << ", " << p * l
                         << "]";
  return success();
}
