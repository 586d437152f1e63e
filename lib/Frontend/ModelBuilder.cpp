//===- ModelBuilder.cpp - V-MoE description -> MLIR -------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Emits the network of docs/ModelFormat.md §2 at tensor level. Linear maps
// are linalg.generic contractions (reduction loop outside the output loop),
// LayerNorm and softmax are reductions over the last dim, attention keeps
// heads as a tensor dim instead of transposing, dense MLPs are single-expert
// vmoe.expert_ffn ops and MoE blocks are the vmoe op chain with a runtime
// capacity. Weights are slices of one flat buffer (offsets of
// weightLayout()).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Frontend/ModelBuilder.h"

#include "vmoe/Dialect/VMoE/IR/Capacity.h"
#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Utils/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::vmoe;
using namespace mlir::vmoe::frontend;

using utils::IteratorType;

int64_t mlir::vmoe::frontend::batchImages(const ModelDescription &model,
                                          const BuildOptions &options) {
  return model.moe.groupSize * options.groupsPerBatch;
}

double mlir::vmoe::frontend::maxCapacityRatio(const ModelDescription &model,
                                              const BuildOptions &options) {
  if (options.maxCapacityRatio > 0)
    return options.maxCapacityRatio;
  return std::max(model.moe.capacityRatio, 2.0);
}

static ::vmoe::CapacityRounding rounding(const MoESettings &moe) {
  return moe.capacityRule == "ceil" ? ::vmoe::CapacityRounding::Ceil
                                    : ::vmoe::CapacityRounding::Round;
}

/// The per-expert capacity of a MoE layer at ratio `ratio`.
static int64_t layerCapacity(const ModelDescription &model, double ratio) {
  const MoESettings &moe = model.moe;
  return ::vmoe::computeCapacity(moe.k, model.tokensPerGroup(), ratio,
                                 moe.numExperts, rounding(moe), moe.multipleOf);
}

llvm::Error
mlir::vmoe::frontend::validateBuildOptions(const ModelDescription &model,
                                           const BuildOptions &options) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (options.groupsPerBatch < 1)
    return error("groups-per-batch: must be >= 1");
  double maxRatio = maxCapacityRatio(model, options);
  if (!std::isfinite(maxRatio))
    return error("max-capacity-ratio: must be finite");
  if (maxRatio < model.moe.capacityRatio)
    return error("max-capacity-ratio: " + ::vmoe::formatShortest(maxRatio) +
                 " is below the default capacity ratio " +
                 ::vmoe::formatShortest(model.moe.capacityRatio));
  if (model.moeBlocks().empty())
    return llvm::Error::success();
  for (double ratio : {model.moe.capacityRatio, maxRatio})
    if (layerCapacity(model, ratio) < 1)
      return error("moe.capacity_ratio: capacity rounds to 0 (" +
                   ::vmoe::describeRawCapacity(model.moe.k,
                                               model.tokensPerGroup(), ratio,
                                               model.moe.numExperts) +
                   ")");
  return llvm::Error::success();
}

std::string mlir::vmoe::frontend::buildManifest(const ModelDescription &model,
                                                const BuildOptions &options) {
  llvm::json::Array layers;
  for (int64_t block : model.moeBlocks())
    layers.push_back(llvm::json::Object{
        {"block", block},
        {"num_experts", model.moe.numExperts},
        {"k", model.moe.k},
        {"tokens_per_group", model.tokensPerGroup()},
        {"capacity_rule", model.moe.capacityRule},
        {"multiple_of", model.moe.multipleOf},
        {"max_capacity",
         layerCapacity(model, maxCapacityRatio(model, options))}});
  llvm::json::Array tensors;
  std::vector<WeightTensor> layout = weightLayout(model);
  for (const WeightTensor &tensor : layout)
    tensors.push_back(llvm::json::Object{
        {"name", tensor.name},
        {"shape", llvm::json::Array(tensor.shape)},
        {"offset", tensor.offset}});
  llvm::json::Object manifest{
      {"format", "vmoe-compiled-model"},
      {"version", 1},
      {"name", model.name},
      {"target", options.target},
      {"batch_images", batchImages(model, options)},
      {"image", llvm::json::Object{{"channels", model.channels},
                                   {"height", model.height},
                                   {"width", model.width}}},
      {"input", llvm::json::Object{{"mean", llvm::json::Array(model.mean)},
                                   {"std", llvm::json::Array(model.std)}}},
      {"classes", model.classes},
      {"class_names", llvm::json::Array(model.classNames)},
      {"routing", model.moe.routing},
      {"capacity_ratio", model.moe.capacityRatio},
      {"max_capacity_ratio", maxCapacityRatio(model, options)},
      {"moe_layers", std::move(layers)},
      {"weights_size", weightsSize(layout)},
      {"tensors", std::move(tensors)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(manifest));
  return text;
}

void mlir::vmoe::frontend::registerFrontendDialects(
    DialectRegistry &registry) {
  registry.insert<arith::ArithDialect, bufferization::BufferizationDialect,
                  func::FuncDialect, linalg::LinalgDialect, LLVM::LLVMDialect,
                  math::MathDialect, tensor::TensorDialect, VMoEDialect>();
}

/// The activation enum of a description string (validated by the parser).
static Activation parseActivation(llvm::StringRef name) {
  return llvm::StringSwitch<Activation>(name)
      .Case("gelu_erf", Activation::gelu_erf)
      .Case("relu", Activation::relu)
      .Case("silu", Activation::silu)
      .Default(Activation::gelu_tanh);
}

namespace {

/// Emits the forward function of one model.
class ForwardBuilder {
public:
  ForwardBuilder(OpBuilder &b, Location loc, const ModelDescription &model,
                 const BuildOptions &options, Value weights)
      : b(b), loc(loc), model(model), options(options), weights(weights),
        f32(b.getF32Type()) {
    for (WeightTensor &tensor : weightLayout(model))
      layout[tensor.name] = tensor;
  }

  /// The weight tensor `name` as a tensor of its shape.
  Value weight(const std::string &name) {
    const WeightTensor &tensor = layout.at(name);
    Value flat = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({tensor.numElements()}, f32), weights,
        ArrayRef<OpFoldResult>{b.getIndexAttr(tensor.offset)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(tensor.numElements())},
        unitStrides(b, 1));
    if (tensor.shape.size() == 1)
      return flat;
    ReassociationIndices all;
    for (size_t i = 0; i < tensor.shape.size(); ++i)
      all.push_back(i);
    return tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(tensor.shape, f32), flat,
        ArrayRef<ReassociationIndices>{all});
  }

  /// x [M, K] . kernel [K, N] + bias [N].
  Value linear(Value x, const std::string &prefix) {
    Value kernel = weight(prefix + ".kernel");
    Value bias = weight(prefix + ".bias");
    int64_t m = shape(x)[0];
    int64_t n = cast<RankedTensorType>(kernel.getType()).getDimSize(1);
    Value init = filledTensor(b, loc, {b.getIndexAttr(m), b.getIndexAttr(n)},
                              floatConst(b, loc, f32, 0));
    MLIRContext *ctx = b.getContext();
    Value product =
        linalg::GenericOp::create(
            b, loc, init.getType(), ValueRange{x, kernel}, ValueRange{init},
            {projectionMap(ctx, 3, {0, 1}), projectionMap(ctx, 3, {1, 2}),
             projectionMap(ctx, 3, {0, 2})},
            {IteratorType::parallel, IteratorType::reduction,
             IteratorType::parallel},
            buildMultiplyAccumulateBody)
            .getResult(0);
    return addBroadcastLast(product, bias);
  }

  /// x [..., N] + v [N] (v broadcast over the leading dims).
  Value addBroadcastLast(Value x, Value v) {
    unsigned rank = shape(x).size();
    AffineMap id = b.getMultiDimIdentityMap(rank);
    return linalg::GenericOp::create(
               b, loc, x.getType(), ValueRange{v}, ValueRange{x},
               {projectionMap(b.getContext(), rank, {rank - 1}), id},
               SmallVector<IteratorType>(rank, IteratorType::parallel),
               [](OpBuilder &b, Location loc, ValueRange args) {
                 linalg::YieldOp::create(
                     b, loc,
                     ValueRange{arith::AddFOp::create(b, loc, args[1], args[0])});
               })
        .getResult(0);
  }

  /// a + b elementwise (same shape).
  Value add(Value lhs, Value rhs) {
    unsigned rank = shape(lhs).size();
    AffineMap id = b.getMultiDimIdentityMap(rank);
    Value init = emptyTensor(b, loc, mixedSizes(b, loc, lhs), f32);
    return linalg::GenericOp::create(
               b, loc, lhs.getType(), ValueRange{lhs, rhs}, ValueRange{init},
               {id, id, id},
               SmallVector<IteratorType>(rank, IteratorType::parallel),
               [](OpBuilder &b, Location loc, ValueRange args) {
                 linalg::YieldOp::create(
                     b, loc,
                     ValueRange{arith::AddFOp::create(b, loc, args[0], args[1])});
               })
        .getResult(0);
  }

  /// LayerNorm over the last dim of x [M, D] with `prefix`.scale/.bias.
  Value layerNorm(Value x, const std::string &prefix) {
    double d = static_cast<double>(shape(x).back());
    auto addFn = [](OpBuilder &b, Location loc, Value acc, Value v) {
      return Value(arith::AddFOp::create(b, loc, acc, v));
    };
    Value sums = reduceLastDim(b, loc, x, 0.0, addFn);
    Value width = floatConst(b, loc, f32, d);
    Value mean = mapScalars(sums, [&](OpBuilder &b, Location loc, Value s) {
      return Value(arith::DivFOp::create(b, loc, s, width));
    });
    Value centered = mapWithRowValue(
        b, loc, x, mean, [](OpBuilder &b, Location loc, Value v, Value m) {
          return Value(arith::SubFOp::create(b, loc, v, m));
        });
    Value squares = reduceLastDim(
        b, loc, centered, 0.0,
        [](OpBuilder &b, Location loc, Value acc, Value v) {
          return Value(arith::AddFOp::create(
              b, loc, acc, arith::MulFOp::create(b, loc, v, v)));
        });
    Value eps = floatConst(b, loc, f32, model.layerNormEpsilon);
    Value one = floatConst(b, loc, f32, 1.0);
    Value rstd = mapScalars(squares, [&](OpBuilder &b, Location loc, Value s) {
      Value var = arith::DivFOp::create(b, loc, s, width);
      Value root = math::SqrtOp::create(b, loc,
                                        arith::AddFOp::create(b, loc, var, eps));
      return Value(arith::DivFOp::create(b, loc, one, root));
    });
    Value normed = mapWithRowValue(
        b, loc, centered, rstd,
        [](OpBuilder &b, Location loc, Value v, Value r) {
          return Value(arith::MulFOp::create(b, loc, v, r));
        });
    Value scale = weight(prefix + ".scale");
    Value bias = weight(prefix + ".bias");
    unsigned rank = shape(x).size();
    AffineMap id = b.getMultiDimIdentityMap(rank);
    AffineMap last = projectionMap(b.getContext(), rank, {rank - 1});
    return linalg::GenericOp::create(
               b, loc, normed.getType(), ValueRange{scale, bias},
               ValueRange{normed}, {last, last, id},
               SmallVector<IteratorType>(rank, IteratorType::parallel),
               [](OpBuilder &b, Location loc, ValueRange args) {
                 Value scaled = arith::MulFOp::create(b, loc, args[2], args[0]);
                 linalg::YieldOp::create(
                     b, loc,
                     ValueRange{arith::AddFOp::create(b, loc, scaled, args[1])});
               })
        .getResult(0);
  }

  /// Multi-head self-attention of x [N*T, D].
  Value attention(Value x, const std::string &prefix) {
    int64_t n = batchImages(model, options), t = model.tokensPerImage();
    int64_t d = model.modelWidth, heads = model.heads, dh = d / heads;
    Value qkv = linear(x, prefix + ".qkv");
    // [N*T, 3D] -> [N, T, 3, heads, dh]; q, k, v as [N, T, heads, dh].
    Value split = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({n, t, 3, heads, dh}, f32), qkv,
        ArrayRef<ReassociationIndices>{{0, 1}, {2, 3, 4}});
    auto part = [&](int64_t index) {
      SmallVector<OpFoldResult> offsets = {b.getIndexAttr(0), b.getIndexAttr(0),
                                           b.getIndexAttr(index),
                                           b.getIndexAttr(0), b.getIndexAttr(0)};
      SmallVector<OpFoldResult> sizes = {
          b.getIndexAttr(n), b.getIndexAttr(t), b.getIndexAttr(1),
          b.getIndexAttr(heads), b.getIndexAttr(dh)};
      return Value(tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({n, t, heads, dh}, f32), split,
          offsets, sizes, unitStrides(b, 5)));
    };
    Value q = part(0), k = part(1), v = part(2);
    MLIRContext *ctx = b.getContext();
    // scores[n, h, i, j] = sum_c q[n, i, h, c] k[n, j, h, c] / sqrt(dh).
    Value scoresInit = filledTensor(
        b, loc,
        {b.getIndexAttr(n), b.getIndexAttr(heads), b.getIndexAttr(t),
         b.getIndexAttr(t)},
        floatConst(b, loc, f32, 0));
    Value scores =
        linalg::GenericOp::create(
            b, loc, scoresInit.getType(), ValueRange{q, k},
            ValueRange{scoresInit},
            {projectionMap(ctx, 5, {0, 2, 1, 4}),
             projectionMap(ctx, 5, {0, 3, 1, 4}),
             projectionMap(ctx, 5, {0, 1, 2, 3})},
            {IteratorType::parallel, IteratorType::parallel,
             IteratorType::parallel, IteratorType::parallel,
             IteratorType::reduction},
            buildMultiplyAccumulateBody)
            .getResult(0);
    Value root = floatConst(b, loc, f32, std::sqrt(static_cast<double>(dh)));
    scores = mapScalars(scores, [&](OpBuilder &b, Location loc, Value s) {
      return Value(arith::DivFOp::create(b, loc, s, root));
    });
    Value probs = buildSoftmaxLastDim(b, loc, scores);
    // context[n, i, h, c] = sum_j probs[n, h, i, j] v[n, j, h, c]; loops
    // (n, h, i, j, c) keep the contiguous c innermost.
    Value contextInit = filledTensor(
        b, loc,
        {b.getIndexAttr(n), b.getIndexAttr(t), b.getIndexAttr(heads),
         b.getIndexAttr(dh)},
        floatConst(b, loc, f32, 0));
    Value context =
        linalg::GenericOp::create(
            b, loc, contextInit.getType(), ValueRange{probs, v},
            ValueRange{contextInit},
            {projectionMap(ctx, 5, {0, 1, 2, 3}),
             projectionMap(ctx, 5, {0, 3, 1, 4}),
             projectionMap(ctx, 5, {0, 2, 1, 4})},
            {IteratorType::parallel, IteratorType::parallel,
             IteratorType::parallel, IteratorType::reduction,
             IteratorType::parallel},
            buildMultiplyAccumulateBody)
            .getResult(0);
    Value merged = tensor::CollapseShapeOp::create(
        b, loc, context, ArrayRef<ReassociationIndices>{{0, 1}, {2, 3}});
    return linear(merged, prefix + ".out");
  }

  /// The dense MLP of x [M, D]: a single-expert vmoe.expert_ffn.
  Value mlp(Value x, const std::string &prefix) {
    int64_t m = shape(x)[0], d = model.modelWidth, h = model.mlpDim;
    auto expand = [&](Value v, ArrayRef<int64_t> newShape,
                      ArrayRef<ReassociationIndices> groups) {
      return Value(tensor::ExpandShapeOp::create(
          b, loc, RankedTensorType::get(newShape, f32), v, groups));
    };
    Value buffers = expand(x, {1, 1, m, d}, {{0, 1, 2}, {3}});
    Value w1 = expand(weight(prefix + ".fc1.kernel"), {1, d, h}, {{0, 1}, {2}});
    Value b1 = expand(weight(prefix + ".fc1.bias"), {1, h}, {{0, 1}});
    Value w2 = expand(weight(prefix + ".fc2.kernel"), {1, h, d}, {{0, 1}, {2}});
    Value b2 = expand(weight(prefix + ".fc2.bias"), {1, d}, {{0, 1}});
    Value y = ExpertFFNOp::create(
        b, loc, buffers.getType(), buffers, w1, b1, w2, b2,
        ActivationAttr::get(b.getContext(),
                            parseActivation(model.mlpActivation)));
    return tensor::CollapseShapeOp::create(
        b, loc, y, ArrayRef<ReassociationIndices>{{0, 1, 2}, {3}});
  }

  /// The MoE layer of x [M, D] at runtime ratio `ratio`; `stats` [E + 1]
  /// receives the kept choices per expert and the dropped choices.
  Value moe(Value x, const std::string &prefix, Value ratio, Value &stats) {
    const MoESettings &settings = model.moe;
    int64_t m = shape(x)[0], d = model.modelWidth;
    int64_t s = model.tokensPerGroup(), g = m / s;
    int64_t e = settings.numExperts, k = settings.k;
    MLIRContext *ctx = b.getContext();
    Value tokens = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({g, s, d}, f32), x,
        ArrayRef<ReassociationIndices>{{0, 1}, {2}});
    auto route = RouteOp::create(
        b, loc, tokens, weight(prefix + ".router.kernel"), k,
        settings.order == "topk_softmax" ? RouteOrder::topk_softmax
                                         : RouteOrder::softmax_topk,
        settings.normalize);
    Value order;
    if (settings.routing == "bpr") {
      bool sum = settings.score == "sum_topk";
      order = BPRSortOp::create(
          b, loc, route.getGates(),
          sum ? PriorityScore::sum_topk : PriorityScore::max,
          sum ? std::optional<int64_t>(k) : std::nullopt);
    }
    auto rule = settings.capacityRule == "ceil" ? CapacityRule::ceil
                                                : CapacityRule::round;
    int64_t maxCapacity =
        layerCapacity(model, maxCapacityRatio(model, options));
    auto capacity = CapacityOp::create(
        b, loc, b.getIndexType(), ratio, static_cast<uint64_t>(k),
        static_cast<uint64_t>(e), static_cast<uint64_t>(s),
        static_cast<uint64_t>(maxCapacity), rule,
        static_cast<uint64_t>(settings.multipleOf));
    auto i32Tensor = [&](ArrayRef<int64_t> dims) {
      return RankedTensorType::get(dims, b.getI32Type());
    };
    auto dispatch = DispatchOp::create(
        b, loc, RankedTensorType::get({e, g, maxCapacity, d}, f32),
        i32Tensor({g, s, k}), tokens, route.getExpertIds(), order,
        capacity.getResult(), /*capacity_ratio=*/FloatAttr(),
        CapacityRuleAttr::get(ctx, rule),
        b.getI64IntegerAttr(settings.multipleOf),
        b.getI64IntegerAttr(maxCapacity));
    Value y = ExpertFFNOp::create(
        b, loc, dispatch.getBuffers().getType(), dispatch.getBuffers(),
        weight(prefix + ".w1"), weight(prefix + ".b1"), weight(prefix + ".w2"),
        weight(prefix + ".b2"),
        ActivationAttr::get(ctx, parseActivation(settings.activation)));
    Value out = CombineOp::create(b, loc, tokens.getType(), y,
                                  route.getExpertIds(), dispatch.getSlots(),
                                  route.getWeights());
    stats = routingStats(route.getExpertIds(), dispatch.getSlots(), e);
    return tensor::CollapseShapeOp::create(
        b, loc, out, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  }

  /// [E + 1] i32: kept choices per expert, then dropped choices.
  Value routingStats(Value ids, Value slots, int64_t e) {
    MLIRContext *ctx = b.getContext();
    Type i32 = b.getI32Type();
    Value counts =
        filledTensor(b, loc, {b.getIndexAttr(e)}, i32Const(b, loc, 0));
    counts = linalg::GenericOp::create(
                 b, loc, counts.getType(), ValueRange{ids, slots},
                 ValueRange{counts},
                 {projectionMap(ctx, 4, {0, 1, 2}),
                  projectionMap(ctx, 4, {0, 1, 2}), projectionMap(ctx, 4, {3})},
                 {IteratorType::reduction, IteratorType::reduction,
                  IteratorType::reduction, IteratorType::parallel},
                 [&](OpBuilder &b, Location loc, ValueRange args) {
                   Value expert = arith::IndexCastOp::create(
                       b, loc, i32, linalg::IndexOp::create(b, loc, 3));
                   Value mine = arith::CmpIOp::create(
                       b, loc, arith::CmpIPredicate::eq, args[0], expert);
                   Value kept = arith::CmpIOp::create(
                       b, loc, arith::CmpIPredicate::sge, args[1],
                       i32Const(b, loc, 0));
                   Value both = arith::AndIOp::create(b, loc, mine, kept);
                   Value one = arith::ExtUIOp::create(b, loc, i32, both);
                   linalg::YieldOp::create(
                       b, loc,
                       ValueRange{arith::AddIOp::create(b, loc, args[2], one)});
                 })
                 .getResult(0);
    Value dropped = filledTensor(b, loc, {}, i32Const(b, loc, 0));
    dropped = linalg::GenericOp::create(
                  b, loc, dropped.getType(), ValueRange{slots},
                  ValueRange{dropped},
                  {b.getMultiDimIdentityMap(3), AffineMap::get(3, 0, ctx)},
                  SmallVector<IteratorType>(3, IteratorType::reduction),
                  [&](OpBuilder &b, Location loc, ValueRange args) {
                    Value lost = arith::CmpIOp::create(
                        b, loc, arith::CmpIPredicate::slt, args[0],
                        i32Const(b, loc, 0));
                    Value one = arith::ExtUIOp::create(b, loc, i32, lost);
                    linalg::YieldOp::create(
                        b, loc,
                        ValueRange{arith::AddIOp::create(b, loc, args[1], one)});
                  })
                  .getResult(0);
    Value row = emptyTensor(b, loc, {b.getIndexAttr(e + 1)}, i32);
    row = tensor::InsertSliceOp::create(
        b, loc, counts, row, ArrayRef<OpFoldResult>{b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(e)}, unitStrides(b, 1));
    Value total = tensor::ExtractOp::create(b, loc, dropped, ValueRange{});
    return tensor::InsertOp::create(b, loc, total, row,
                                    ValueRange{indexConst(b, loc, e)});
  }

  /// Images [N, C, H, W] -> patch rows [N*P, C*ps*ps], pixels in (c, i, j)
  /// order within a patch, patches row-major over the grid.
  Value patchify(Value images) {
    int64_t n = batchImages(model, options), c = model.channels;
    int64_t ps = model.patchSize;
    int64_t hp = model.height / ps, wp = model.width / ps;
    Value grid = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({n, c, hp, ps, wp, ps}, f32), images,
        ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}, {4, 5}});
    Value init = emptyTensor(
        b, loc,
        {b.getIndexAttr(n), b.getIndexAttr(hp), b.getIndexAttr(wp),
         b.getIndexAttr(c), b.getIndexAttr(ps), b.getIndexAttr(ps)},
        f32);
    Value moved = linalg::TransposeOp::create(
                      b, loc, grid, init, ArrayRef<int64_t>{0, 2, 4, 1, 3, 5})
                      .getResult()[0];
    return tensor::CollapseShapeOp::create(
        b, loc, moved,
        ArrayRef<ReassociationIndices>{{0, 1, 2}, {3, 4, 5}});
  }

  /// The whole network: images -> (logits [N, classes], stats [L, E + 1]).
  std::pair<Value, Value> forward(Value images, Value ratio) {
    int64_t n = batchImages(model, options), p = model.numPatches();
    int64_t t = model.tokensPerImage(), d = model.modelWidth;
    MLIRContext *ctx = b.getContext();
    Value embedded = linear(patchify(images), "embedding");
    Value x = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({n, p, d}, f32), embedded,
        ArrayRef<ReassociationIndices>{{0, 1}, {2}});
    if (model.head == "token") {
      Value cls = tensor::CollapseShapeOp::create(
          b, loc, weight("cls_token"), ArrayRef<ReassociationIndices>{{0, 1}});
      Value clsInit = emptyTensor(
          b, loc, {b.getIndexAttr(n), b.getIndexAttr(1), b.getIndexAttr(d)},
          f32);
      Value clsRows = linalg::GenericOp::create(
                          b, loc, clsInit.getType(), ValueRange{cls},
                          ValueRange{clsInit},
                          {projectionMap(ctx, 3, {2}),
                           b.getMultiDimIdentityMap(3)},
                          SmallVector<IteratorType>(3, IteratorType::parallel),
                          [](OpBuilder &b, Location loc, ValueRange args) {
                            linalg::YieldOp::create(b, loc,
                                                    ValueRange{args[0]});
                          })
                          .getResult(0);
      Value all = emptyTensor(
          b, loc, {b.getIndexAttr(n), b.getIndexAttr(t), b.getIndexAttr(d)},
          f32);
      auto at = [&](int64_t token, int64_t count) {
        return std::make_pair(
            SmallVector<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(token),
                                      b.getIndexAttr(0)},
            SmallVector<OpFoldResult>{b.getIndexAttr(n), b.getIndexAttr(count),
                                      b.getIndexAttr(d)});
      };
      auto [clsOffsets, clsSizes] = at(0, 1);
      all = tensor::InsertSliceOp::create(b, loc, clsRows, all, clsOffsets,
                                          clsSizes, unitStrides(b, 3));
      auto [patchOffsets, patchSizes] = at(1, p);
      x = tensor::InsertSliceOp::create(b, loc, x, all, patchOffsets,
                                        patchSizes, unitStrides(b, 3));
    }
    // + pos_embedding [T, D], broadcast over images.
    Value pos = weight("pos_embedding");
    x = linalg::GenericOp::create(
            b, loc, x.getType(), ValueRange{pos}, ValueRange{x},
            {projectionMap(ctx, 3, {1, 2}), b.getMultiDimIdentityMap(3)},
            SmallVector<IteratorType>(3, IteratorType::parallel),
            [](OpBuilder &b, Location loc, ValueRange args) {
              linalg::YieldOp::create(
                  b, loc,
                  ValueRange{arith::AddFOp::create(b, loc, args[1], args[0])});
            })
            .getResult(0);
    x = tensor::CollapseShapeOp::create(
        b, loc, x, ArrayRef<ReassociationIndices>{{0, 1}, {2}});

    SmallVector<Value> statsRows;
    for (int64_t i = 0; i < model.depth; ++i) {
      std::string block = "blocks." + std::to_string(i);
      x = add(x, attention(layerNorm(x, block + ".ln1"), block + ".attn"));
      Value normed = layerNorm(x, block + ".ln2");
      if (model.isMoEBlock(i)) {
        Value stats;
        x = add(x, moe(normed, block + ".moe", ratio, stats));
        statsRows.push_back(stats);
      } else {
        x = add(x, mlp(normed, block + ".mlp"));
      }
    }
    x = layerNorm(x, "final_ln");
    Value pooled = pool(x);
    Value logits = linear(pooled, "head");

    int64_t e = model.moe.numExperts;
    int64_t layers = static_cast<int64_t>(statsRows.size());
    Value stats = emptyTensor(
        b, loc, {b.getIndexAttr(layers), b.getIndexAttr(e + 1)}, b.getI32Type());
    for (auto [l, row] : llvm::enumerate(statsRows))
      stats = tensor::InsertSliceOp::create(
          b, loc, row, stats,
          ArrayRef<OpFoldResult>{b.getIndexAttr(l), b.getIndexAttr(0)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(e + 1)},
          unitStrides(b, 2));
    return {logits, stats};
  }

  /// The class token, or the mean over tokens, of x [N*T, D] -> [N, D].
  Value pool(Value x) {
    int64_t n = batchImages(model, options), t = model.tokensPerImage();
    int64_t d = model.modelWidth;
    Value tokens = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({n, t, d}, f32), x,
        ArrayRef<ReassociationIndices>{{0, 1}, {2}});
    if (model.head == "token")
      return tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({n, d}, f32), tokens,
          ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0),
                                 b.getIndexAttr(0)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(n), b.getIndexAttr(1),
                                 b.getIndexAttr(d)},
          unitStrides(b, 3));
    MLIRContext *ctx = b.getContext();
    Value init = filledTensor(b, loc, {b.getIndexAttr(n), b.getIndexAttr(d)},
                              floatConst(b, loc, f32, 0));
    Value sums = linalg::GenericOp::create(
                     b, loc, init.getType(), ValueRange{tokens},
                     ValueRange{init},
                     {projectionMap(ctx, 3, {0, 1, 2}),
                      projectionMap(ctx, 3, {0, 2})},
                     {IteratorType::parallel, IteratorType::reduction,
                      IteratorType::parallel},
                     [](OpBuilder &b, Location loc, ValueRange args) {
                       linalg::YieldOp::create(
                           b, loc,
                           ValueRange{
                               arith::AddFOp::create(b, loc, args[1], args[0])});
                     })
                     .getResult(0);
    Value count = floatConst(b, loc, f32, static_cast<double>(t));
    return mapScalars(sums, [&](OpBuilder &b, Location loc, Value v) {
      return Value(arith::DivFOp::create(b, loc, v, count));
    });
  }

private:
  static ArrayRef<int64_t> shape(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  }

  /// fn(v) for every element of `input`.
  Value mapScalars(Value input,
                   function_ref<Value(OpBuilder &, Location, Value)> fn) {
    unsigned rank = shape(input).size();
    AffineMap id = b.getMultiDimIdentityMap(rank);
    return linalg::GenericOp::create(
               b, loc, input.getType(), ValueRange{}, ValueRange{input},
               {id}, SmallVector<IteratorType>(rank, IteratorType::parallel),
               [&](OpBuilder &b, Location loc, ValueRange args) {
                 linalg::YieldOp::create(b, loc,
                                         ValueRange{fn(b, loc, args[0])});
               })
        .getResult(0);
  }

  OpBuilder &b;
  Location loc;
  const ModelDescription &model;
  const BuildOptions &options;
  Value weights;
  Type f32;
  llvm::StringMap<WeightTensor> layout;
};

} // namespace

/// `llvm.func @vmoe_model_manifest() -> !llvm.ptr` returning the manifest.
static void buildManifestAccessor(OpBuilder &b, Location loc,
                                  const std::string &manifest) {
  std::string data = manifest;
  data.push_back('\0');
  auto arrayType =
      LLVM::LLVMArrayType::get(b.getIntegerType(8), data.size());
  LLVM::GlobalOp::create(b, loc, arrayType, /*isConstant=*/true,
                         LLVM::Linkage::Internal, "vmoe_manifest_data",
                         b.getStringAttr(data));
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  auto func = LLVM::LLVMFuncOp::create(
      b, loc, "vmoe_model_manifest", LLVM::LLVMFunctionType::get(ptrType, {}));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(func.addEntryBlock(b));
  Value address =
      LLVM::AddressOfOp::create(b, loc, ptrType, "vmoe_manifest_data");
  LLVM::ReturnOp::create(b, loc, ValueRange{address});
}

OwningOpRef<ModuleOp>
mlir::vmoe::frontend::buildModelModule(MLIRContext &context,
                                       const ModelDescription &model,
                                       const BuildOptions &options) {
  DialectRegistry registry;
  registerFrontendDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();

  Location loc = FileLineColLoc::get(&context, model.name, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc, StringRef(model.name));
  OpBuilder b(&context);
  b.setInsertionPointToEnd(module->getBody());

  Type f32 = b.getF32Type();
  int64_t n = batchImages(model, options);
  int64_t layers = static_cast<int64_t>(model.moeBlocks().size());
  auto imagesType = RankedTensorType::get(
      {n, model.channels, model.height, model.width}, f32);
  auto weightsType =
      RankedTensorType::get({weightsSize(weightLayout(model))}, f32);
  auto logitsType = MemRefType::get({n, model.classes}, f32);
  auto statsType =
      MemRefType::get({layers, model.moe.numExperts + 1}, b.getI32Type());
  auto funcType = b.getFunctionType(
      {imagesType, weightsType, b.getF64Type(), logitsType, statsType}, {});
  auto func = func::FuncOp::create(b, loc, "vmoe_forward", funcType);
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);

  ForwardBuilder builder(b, loc, model, options, entry->getArgument(1));
  auto [logits, stats] =
      builder.forward(entry->getArgument(0), entry->getArgument(2));
  auto store = [&](Value tensor, Value dest) {
    auto op = bufferization::MaterializeInDestinationOp::create(b, loc, tensor,
                                                                dest);
    op.setRestrict(true);
    op.setWritable(true);
  };
  store(logits, entry->getArgument(3));
  store(stats, entry->getArgument(4));
  func::ReturnOp::create(b, loc);

  b.setInsertionPointToEnd(module->getBody());
  buildManifestAccessor(b, loc, buildManifest(model, options));
  return module;
}
