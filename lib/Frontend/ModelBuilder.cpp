//===- ModelBuilder.cpp - V-MoE description -> MLIR -------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Emits the network of docs/ModelFormat.md §2 at tensor level: the
// `@vmoe_forward` function, whose parts are emitted by the files beside this
// one (ForwardBuilder.h), the build options, and the manifest the runtime
// reads. Weights are slices of one flat buffer (offsets of weightLayout()).
//
//===----------------------------------------------------------------------===//

#include "vmoe/Frontend/ModelBuilder.h"

#include "ForwardBuilder.h"

#include "vmoe/Dialect/VMoE/IR/Capacity.h"
#include "vmoe/Dialect/VMoE/IR/VMoE.h"
#include "vmoe/Frontend/SizeLimits.h"
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
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CheckedArithmetic.h"
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
  return model.imagesPerGroupUnit() * options.groupsPerBatch;
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

/// The per-expert capacity of the MoE layer `layer` at ratio `ratio`
/// (token choice: k*S*C/E; expert choice: S*C/E; a fixed `moe.capacity`
/// and the dropless B = S ignore the ratio).
int64_t mlir::vmoe::frontend::moeLayerCapacity(const ModelDescription &model,
                                               const MoESettings &layer,
                                               double ratio) {
  if (int64_t fixed = model.fixedCapacity())
    return fixed;
  return ::vmoe::computeCapacity(layer.capacityChoices(),
                                 model.tokensPerGroup(), ratio,
                                 model.moe.numExperts, rounding(layer),
                                 layer.multipleOf);
}

/// SwiGLU and shared experts are built for one CPU process only: the CUDA
/// lowering has no gated experts and expert parallelism shards w1..b2.
static llvm::Error checkDecoderTargets(const ModelDescription &model,
                                       const BuildOptions &options) {
  if (!model.hasMoE ||
      (model.moe.expert == "mlp" && model.moe.sharedExperts == 0))
    return llvm::Error::success();
  llvm::StringRef what = model.moe.expert == "swiglu" ? "moe.expert \"swiglu\""
                                                      : "moe.shared_experts";
  if (options.target != "cpu")
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "target: " + options.target +
                                       " does not build " + what +
                                       " (cpu only for now)");
  if (options.expertParallel > 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "expert-parallel: " + what +
                                       " runs in one process only");
  return llvm::Error::success();
}

/// Training graphs: token choice layers only (the noise and the losses are
/// those of vmoe.route), on the CPU in one process.
static llvm::Error checkTrainingGraph(const ModelDescription &model,
                                      const BuildOptions &options) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (!options.training)
    return llvm::Error::success();
  if (model.moeBlocks().empty())
    return error("training: the model has no MoE layer");
  if (options.target != "cpu" || options.expertParallel > 0)
    return error("training: training graphs build for the cpu target in one "
                 "process only");
  // The generator's counter holds 2i + 1 for sample i below 2^40.
  std::optional<int64_t> samples =
      llvm::checkedMul(batchImages(model, options) * model.tokensPerImage(),
                       model.moe.numExperts);
  if (!samples || *samples >= (int64_t(1) << 39))
    return error("training: the router noise of a batch has more than 2^39 "
                 "samples (the noise generator's counter)");
  for (int64_t block : model.moeBlocks()) {
    MoESettings layer = model.layerSettings(block);
    if (!layer.isTokenChoice())
      return error("training: MoE block " + llvm::Twine(block) + " uses " +
                   layer.routing +
                   " routing; training graphs (noisy gating, auxiliary "
                   "losses) support token choice layers (vanilla, bpr) only");
  }
  return llvm::Error::success();
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
  if (llvm::Error e = checkCapacityRatio("max-capacity-ratio", maxRatio))
    return e;
  if (maxRatio < model.moe.capacityRatio)
    return error("max-capacity-ratio: " + ::vmoe::formatShortest(maxRatio) +
                 " is below the default capacity ratio " +
                 ::vmoe::formatShortest(model.moe.capacityRatio));
  if (llvm::Error e = checkBuildSizes(model, options))
    return e;
  if (llvm::Error e = checkDecoderTargets(model, options))
    return e;
  if (llvm::Error e = checkTrainingGraph(model, options))
    return e;
  if (options.expertParallel < 0)
    return error("expert-parallel: must be >= 1");
  if (options.precision != "f32" && options.precision != "bf16")
    return error("precision: must be f32 or bf16, got '" + options.precision +
                 "'");
  if (options.precision == "bf16" &&
      (options.target != "cpu" || options.expertParallel > 0))
    return error("precision: bf16 expert weights need the cpu target in one "
                 "process (not --target=cuda, where --gpu-mma=bf16 exists, "
                 "nor --expert-parallel)");
  if (options.expertParallel > 0) {
    if (options.target != "cpu")
      return error("expert-parallel: only the cpu target runs over MPI");
    for (int64_t block : model.moeBlocks()) {
      MoESettings layer = model.layerSettings(block);
      if (layer.routing == "expert_choice" || layer.routing == "soft")
        return error("expert-parallel: MoE block " + llvm::Twine(block) +
                     " uses " + layer.routing +
                     " routing; expert parallelism supports token choice "
                     "layers (vanilla, bpr) only");
    }
    if (!model.moeBlocks().empty() &&
        model.moe.numExperts % options.expertParallel != 0)
      return error("expert-parallel: " + llvm::Twine(model.moe.numExperts) +
                   " experts are not divisible by " +
                   llvm::Twine(options.expertParallel) + " ranks");
  }
  if (model.fixedCapacity())
    return llvm::Error::success();
  for (int64_t block : model.moeBlocks()) {
    MoESettings layer = model.layerSettings(block);
    if (layer.routing == "soft") // Soft MoE has no capacity.
      continue;
    for (double ratio : {model.moe.capacityRatio, maxRatio})
      if (moeLayerCapacity(model, layer, ratio) < 1)
        return error("moe.capacity_ratio: capacity rounds to 0 (" +
                     ::vmoe::describeRawCapacity(layer.capacityChoices(),
                                                 model.tokensPerGroup(), ratio,
                                                 model.moe.numExperts) +
                     ")");
  }
  return llvm::Error::success();
}

std::string mlir::vmoe::frontend::buildManifest(const ModelDescription &model,
                                                const BuildOptions &options) {
  llvm::json::Array layers;
  for (int64_t block : model.moeBlocks()) {
    MoESettings layer = model.layerSettings(block);
    // Soft MoE layers have no capacity: their P slots stand in for it.
    bool soft = layer.routing == "soft";
    llvm::json::Object entry{
        {"block", block},
        {"routing", layer.routing},
        {"num_experts", model.moe.numExperts},
        {"k", soft ? 1 : layer.capacityChoices()},
        {"tokens_per_group", model.layerTokensPerGroup(layer)},
        {"capacity_rule", layer.capacityRule},
        {"multiple_of", layer.multipleOf},
        {"max_capacity",
         soft ? model.layerSlotsPerExpert(layer)
              : moeLayerCapacity(model, layer,
                                 maxCapacityRatio(model, options))}};
    if (soft)
      entry["slots_per_expert"] = model.layerSlotsPerExpert(layer);
    // A fixed capacity does not follow the runtime capacity ratio.
    else if (model.fixedCapacity())
      entry["capacity"] = model.fixedCapacity();
    if (!soft && model.moe.dropless)
      entry["dropless"] = true;
    if (!soft && model.moe.expert != "mlp")
      entry["expert"] = model.moe.expert;
    if (model.moe.sharedExperts)
      entry["shared_experts"] = model.moe.sharedExperts;
    layers.push_back(std::move(entry));
  }
  llvm::json::Array tensors;
  std::vector<WeightTensor> layout = weightLayout(model);
  // Under expert parallelism a rank reads only its rows (experts) of the
  // expert tensors.
  llvm::StringSet<> sharded;
  if (options.expertParallel > 0)
    for (int64_t block : model.moeBlocks())
      for (const char *name : {"w1", "b1", "w2", "b2"})
        sharded.insert("blocks." + std::to_string(block) + ".moe." + name);
  for (const WeightTensor &tensor : layout) {
    llvm::json::Object entry{{"name", tensor.name},
                             {"shape", llvm::json::Array(tensor.shape)},
                             {"offset", tensor.offset}};
    if (sharded.contains(tensor.name))
      entry["expert_sharded"] = true;
    if (isPanelPackedWeight(model, options, tensor.name, tensor.shape))
      entry["panel_width"] =
          weightPanelWidth(model, options, tensor.name, tensor.shape);
    if (isBF16PanelWeight(model, options, tensor.name, tensor.shape))
      entry["panel_storage"] = "bf16_pairs";
    tensors.push_back(std::move(entry));
  }
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
      {"expert_parallel", options.expertParallel},
      {"training", options.training},
      {"tensors", std::move(tensors)}};
  if (!model.preprocess.empty())
    manifest["preprocess"] = model.preprocess;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(manifest));
  return text;
}

void mlir::vmoe::frontend::registerFrontendDialects(DialectRegistry &registry) {
  registry.insert<arith::ArithDialect, bufferization::BufferizationDialect,
                  func::FuncDialect, linalg::LinalgDialect, LLVM::LLVMDialect,
                  math::MathDialect, tensor::TensorDialect, VMoEDialect>();
}

/// The activation enum of a description string (validated by the parser).
Activation mlir::vmoe::frontend::parseActivation(llvm::StringRef name) {
  return llvm::StringSwitch<Activation>(name)
      .Case("gelu_erf", Activation::gelu_erf)
      .Case("relu", Activation::relu)
      .Case("silu", Activation::silu)
      .Default(Activation::gelu_tanh);
}

ForwardBuilder::ForwardBuilder(OpBuilder &b, Location loc,
                               const ModelDescription &model,
                               const BuildOptions &options, Value weights)
    : b(b), loc(loc), model(model), options(options), weights(weights),
      f32(b.getF32Type()) {
  for (WeightTensor &tensor : weightLayout(model))
    layout[tensor.name] = tensor;
}

/// The whole network: images -> logits [N, classes], stats [L, E + 1] and,
/// in training graphs, losses [L, 3].
ForwardOutputs ForwardBuilder::forward(Value images, Value ratio,
                                       Value validImages) {
  numValidTokens = arith::MulIOp::create(
      b, loc, arith::IndexCastOp::create(b, loc, b.getIndexType(), validImages),
      indexConst(b, loc, model.tokensPerImage()));
  Value x = embed(images);

  // With a class-token head the last block computes the class tokens' rows
  // only: a dense block attends from the class tokens alone; an MoE block
  // routes every token (capacity is shared) but runs the experts on the
  // class tokens' kept choices.
  bool classTokensOnly = lastBlockForClassTokens();
  SmallVector<Value> statsRows;
  for (int64_t i = 0; i < model.depth; ++i) {
    std::string block = "blocks." + std::to_string(i);
    bool lastForClass = classTokensOnly && i == model.depth - 1;
    if (lastForClass && !model.isMoEBlock(i)) {
      x = add(classTokens(x), attention(norm(x, block + ".ln1"),
                                        block + ".attn",
                                        /*classQueriesOnly=*/true));
      x = add(x, mlp(norm(x, block + ".ln2"), block + ".mlp"));
      continue;
    }
    x = add(x, attention(norm(x, block + ".ln1"), block + ".attn"));
    Value normed = norm(x, block + ".ln2");
    if (model.isMoEBlock(i)) {
      currentBlock = i;
      Value stats;
      if (lastForClass)
        x = add(classTokens(x), moeClassTokens(normed, block + ".moe",
                                               model.layerSettings(i), ratio,
                                               stats));
      else
        x = add(x, moe(normed, block + ".moe", model.layerSettings(i), ratio,
                       stats));
      statsRows.push_back(stats);
    } else {
      x = add(x, mlp(normed, block + ".mlp"));
    }
  }
  Value logits = head(x, classTokensOnly);

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
  if (!options.training)
    return {logits, stats, Value()};
  Value losses =
      emptyTensor(b, loc, {b.getIndexAttr(layers), b.getIndexAttr(3)}, f32);
  for (auto [l, row] : llvm::enumerate(lossRows))
    losses = tensor::InsertSliceOp::create(
        b, loc, row, losses,
        ArrayRef<OpFoldResult>{b.getIndexAttr(l), b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(3)},
        unitStrides(b, 2));
  return {logits, stats, losses};
}

/// `llvm.func @vmoe_model_manifest() -> !llvm.ptr` returning the manifest.
static void buildManifestAccessor(OpBuilder &b, Location loc,
                                  const std::string &manifest) {
  std::string data = manifest;
  data.push_back('\0');
  auto arrayType = LLVM::LLVMArrayType::get(b.getIntegerType(8), data.size());
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
  SmallVector<Type> argTypes = {imagesType,     weightsType, b.getF64Type(),
                                b.getI64Type(), logitsType,  statsType};
  // Training graphs: the losses [L, 3] (means over the batch's groups).
  if (options.training)
    argTypes.push_back(MemRefType::get({layers, 3}, f32));
  auto funcType = b.getFunctionType(argTypes, {});
  auto func = func::FuncOp::create(b, loc, "vmoe_forward", funcType);
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  // The caller's images and weights are read only: bufferization never
  // writes them in place (the runtime passes a full batch's images as they
  // are).
  for (unsigned arg : {0u, 1u})
    func.setArgAttr(arg, bufferization::BufferizationDialect::kWritableAttrName,
                    b.getBoolAttr(false));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);

  ForwardBuilder builder(b, loc, model, options, entry->getArgument(1));
  ForwardOutputs outputs = builder.forward(
      entry->getArgument(0), entry->getArgument(2), entry->getArgument(3));
  auto store = [&](Value tensor, Value dest) {
    auto op =
        bufferization::MaterializeInDestinationOp::create(b, loc, tensor, dest);
    op.setRestrict(true);
    op.setWritable(true);
  };
  store(outputs.logits, entry->getArgument(4));
  store(outputs.stats, entry->getArgument(5));
  if (options.training)
    store(outputs.losses, entry->getArgument(6));
  func::ReturnOp::create(b, loc);

  b.setInsertionPointToEnd(module->getBody());
  buildManifestAccessor(b, loc, buildManifest(model, options));
  return module;
}
