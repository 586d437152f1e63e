//===- vmoe-compile.cpp - V-MoE model compiler driver -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe-compile: a model description (JSON) -- or a vmoe/MLIR module -- to
// MLIR, LLVM IR, assembly, an object file, a shared library with the C API
// of include/vmoe/Runtime/vmoe_runtime.h, or an executable that loads
// weights and PNG images. The stages reuse the registered pipeline builder
// (vmoe-lower-to-cpu) and the front end of lib/Frontend.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Codegen/GPUGemm.h"
#include "vmoe/Codegen/Microkernel.h"
#include "vmoe/Frontend/ModelBuilder.h"
#include "vmoe/Frontend/ModelDescription.h"
#include "vmoe/Frontend/SizeLimits.h"
#include "vmoe/InitVMoE.h"
#include "vmoe/Pipelines/Pipelines.h"
#include "vmoe/Support/Limits.h"
#include "vmoe/Support/OneLineErrors.h"
#include "vmoe/Support/OptionChecks.h"
#include "vmoe/Target/BF16KernelChoice.h"
#include "vmoe/Target/ObjectCodegen.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;
namespace frontend = mlir::vmoe::frontend;
namespace cl = llvm::cl;

namespace {

enum class Emit { Mlir, LlvmMlir, Llvm, Asm, Obj, Lib, Exe };

cl::OptionCategory category("vmoe-compile options");

cl::opt<std::string> inputFile(cl::Positional, cl::Required,
                               cl::desc("<model.json | module.mlir>"),
                               cl::cat(category));
cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                cl::value_desc("file"), cl::cat(category));
cl::opt<Emit> emit(
    "emit", cl::desc("What to produce"), cl::init(Emit::Exe),
    cl::values(
        clEnumValN(Emit::Mlir, "mlir", "the model in vmoe + upstream MLIR"),
        clEnumValN(Emit::LlvmMlir, "llvm-mlir", "MLIR lowered to LLVM dialect"),
        clEnumValN(Emit::Llvm, "llvm", "optimized LLVM IR"),
        clEnumValN(Emit::Asm, "asm", "assembly"),
        clEnumValN(Emit::Obj, "obj", "an object file"),
        clEnumValN(Emit::Lib, "lib", "a shared library with the C API"),
        clEnumValN(Emit::Exe, "exe", "an executable")),
    cl::cat(category));
cl::opt<unsigned> optLevel("O", cl::desc("LLVM optimization level (0-3)"),
                           cl::Prefix, cl::init(2), cl::cat(category));
cl::opt<std::string> target("target", cl::desc("cpu (default) or cuda"),
                            cl::init("cpu"), cl::cat(category));
cl::opt<std::string> gpuChip("gpu-chip",
                             cl::desc("CUDA architecture (default sm_90)"),
                             cl::init("sm_90"), cl::cat(category));
cl::opt<std::string> gpuMma(
    "gpu-mma",
    cl::desc("--target=cuda: GEMMs (experts, dense layers, attention) on "
             "none (FP32 SIMT, the default), tf32 or bf16 tensor cores"),
    cl::init("none"), cl::cat(category));
cl::opt<bool> gpuEmulate(
    "gpu-emulate",
    cl::desc("--target=cuda: compile the kernels for the host CPU and link "
             "the GPU emulator (libvmoe_gpu_emulator.so), which runs them "
             "without a GPU, for tests (docs/GPU.md)"),
    cl::init(false), cl::cat(category));
cl::opt<std::string> cudaPath("cuda-path",
                              cl::desc("CUDA toolkit (default /usr/local/cuda)"),
                              cl::init("/usr/local/cuda"), cl::cat(category));
cl::opt<std::string> mcpu("mcpu", cl::desc("Target CPU (default: native)"),
                          cl::init("native"), cl::cat(category));
cl::opt<std::string> mattr("mattr", cl::desc("Target features (+a,-b)"),
                           cl::cat(category));
cl::opt<unsigned> vectorWidth(
    "vector-width",
    cl::desc("f32 lanes of the CPU kernels' vectors (0: 16 with AVX-512, "
             "else 8)"),
    cl::init(0), cl::cat(category));
cl::opt<std::string> precision(
    "precision",
    cl::desc("Number format of the weights: f32 (default) or bf16 (token "
             "choice expert kernels and panel-packed dense kernels stored "
             "as bf16, products accumulated in f32 with vdpbf16ps where the "
             "target has AVX512_BF16; routing stays f32)"),
    cl::init("f32"), cl::cat(category));
cl::opt<std::string> bf16Kernels(
    "bf16-kernels",
    cl::desc("With --precision=bf16: auto (default: bf16 kernels where "
             "they beat f32 on the target CPU, measured on the host; else "
             "f32 kernels, with a note) or always"),
    cl::init("auto"), cl::cat(category));
cl::opt<bool> bf16Attention(
    "bf16-attention",
    cl::desc("With --precision=bf16: attention's q.k and p.v products "
             "multiply operands rounded to bf16, accumulated in f32 "
             "(default); false keeps them f32"),
    cl::init(true), cl::cat(category));
// Tests: the host's measured bf16 dot / f32 fma flop ratio, not measured.
cl::opt<double> bf16Speedup("bf16-speedup", cl::Hidden, cl::init(0),
                            cl::cat(category));
cl::opt<bool> parallel("parallel",
                       cl::desc("Parallel loops on OpenMP threads (default)"),
                       cl::init(true), cl::cat(category));
cl::opt<bool> dynamicSchedule(
    "dynamic-schedule",
    cl::desc("Threads take the iterations of the parallel loops of unequal "
             "work (experts, routing groups) one at a time (default); false: "
             "one contiguous chunk each"),
    cl::init(true), cl::cat(category));
cl::opt<bool> parallelLinalg(
    "parallel-linalg",
    cl::desc("Large elementwise and normalization loops run over chunks of "
             "rows on the OpenMP threads too (default)"),
    cl::init(true), cl::cat(category));
cl::opt<bool> prefetchPanels(
    "prefetch-panels",
    cl::desc("GEMMs reading weight panels prefetch the next panel's lines "
             "while computing the current one, and each tile the lines its "
             "epilogue will store and add (default)"),
    cl::init(true), cl::cat(category));
cl::opt<bool> streamingStores(
    "streaming-stores",
    cl::desc("Norm outputs may be written with non-temporal stores where the "
             "runtime measures that writing over lines other cores hold is "
             "slow (default; a model, with --parallel)"),
    cl::init(true), cl::cat(category));
cl::opt<std::string> runtimeDir(
    "runtime-dir",
    cl::desc("Folder of the runtime libraries (default: ../lib beside the "
             "compiler)"),
    cl::cat(category));

// MoE settings that may be overridden at compile time.
cl::opt<std::string> routing("routing",
                             cl::desc("vanilla, bpr, expert_choice or soft "
                                      "(the moe object's routing)"),
                             cl::cat(category));
cl::opt<std::string> score("score", cl::desc("BPR score: max or sum_topk"),
                           cl::cat(category));
cl::opt<double> capacityRatio("capacity-ratio",
                              cl::desc("Default runtime capacity ratio C"),
                              cl::init(0), cl::cat(category));
cl::opt<double> maxCapacityRatio(
    "max-capacity-ratio",
    cl::desc("Largest C the model may run at (buffer size; default max(C, 2))"),
    cl::init(0), cl::cat(category));
cl::opt<std::string> capacityRule("capacity-rule", cl::desc("round or ceil"),
                                  cl::cat(category));
cl::opt<int64_t> numChoices("k", cl::desc("Experts per token"), cl::init(0),
                            cl::cat(category));
cl::opt<int64_t> groupSize("group-size",
                           cl::desc("Images per routing group"), cl::init(0),
                           cl::cat(category));
cl::opt<int64_t> groupsPerBatch("groups-per-batch",
                                cl::desc("Routing groups per compiled batch"),
                                cl::init(1), cl::cat(category));

cl::opt<int64_t> expertParallel(
    "expert-parallel",
    cl::desc("Split the experts of each MoE layer over R MPI ranks; the "
             "executable runs under mpirun -np R (docs/Distributed.md)"),
    cl::value_desc("R"), cl::init(0), cl::cat(category));

cl::opt<bool> allTokenRows(
    "all-token-rows",
    cl::desc("With a class-token head, compute every token's row in the "
             "last block too (default: only the class tokens' rows, which "
             "are all the head reads)"),
    cl::cat(category));
cl::opt<bool> training(
    "training",
    cl::desc("Build a training graph: noisy gating from --seed and the "
             "auxiliary losses as an output (docs/ModelFormat.md)"),
    cl::cat(category));
cl::opt<uint64_t> seed("seed",
                       cl::desc("Seed of the router noise of --training"),
                       cl::value_desc("N"), cl::init(0), cl::cat(category));

} // namespace

/// Prints `error: <message>` and returns the exit code 1.
static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "vmoe-compile") << message << "\n";
  return 1;
}

/// An error naming the option `option` ("--k: ...").
static llvm::Error optionError(const cl::Option &option,
                               const llvm::Twine &problem) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "--" + option.ArgStr + ": " + problem);
}

/// Whether `option` was given on the command line.
static bool given(const cl::Option &option) {
  return option.getNumOccurrences() > 0;
}

/// Checks every option that does not depend on the input's contents
/// (values, ranges, and options the other options make unused), before the
/// input is read: a bad command line is one line and no output, whatever
/// --emit says.
static llvm::Error checkOptions(bool isModel) {
  if (llvm::Error e =
          ::vmoe::checkChoice("--target:", target, {"cpu", "cuda"}))
    return e;
  if (optLevel > 3)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "-O" + llvm::Twine(optLevel.getValue()) +
                                       ": the level must be 0-3");
  bool cuda = target == "cuda";
  for (const cl::Option *option :
       std::initializer_list<const cl::Option *>{&gpuChip, &gpuMma,
                                                 &gpuEmulate, &cudaPath})
    if (given(*option) && !cuda)
      return optionError(*option, "only used with --target=cuda");
  for (const cl::Option *option : std::initializer_list<const cl::Option *>{
           &vectorWidth, &parallel, &dynamicSchedule, &parallelLinalg,
           &prefetchPanels, &streamingStores})
    if (given(*option) && cuda)
      return optionError(*option, "only used with --target=cpu");
  for (const cl::Option *option : std::initializer_list<const cl::Option *>{
           &dynamicSchedule, &parallelLinalg, &streamingStores})
    if (given(*option) && !parallel)
      return optionError(*option, "only used with --parallel (OpenMP "
                                  "threads)");
  for (const cl::Option *option :
       std::initializer_list<const cl::Option *>{&gpuChip, &cudaPath})
    if (given(*option) && gpuEmulate)
      return optionError(*option, "not used with --gpu-emulate (the kernels "
                                  "run on the host CPU)");
  if (cuda) {
    if (llvm::Error e = mlir::vmoe::checkGPUChip("--gpu-chip:", gpuChip))
      return e;
    if (llvm::Error e = mlir::vmoe::checkCUDAToolkitPath("--cuda-path:", cudaPath))
      return e;
    if (llvm::Error e = mlir::vmoe::checkGPUMmaOption("--gpu-mma:", gpuMma))
      return e;
  }
  // 0: 16 lanes with AVX-512, else 8.
  if (llvm::Error e = ::vmoe::checkRange("--vector-width:", vectorWidth, 0,
                                         mlir::vmoe::kMaxMicrokernelLanes))
    return e;
  if (llvm::Error e =
          ::vmoe::checkChoice("--precision:", precision, {"f32", "bf16"}))
    return e;
  if (llvm::Error e = ::vmoe::checkChoice("--bf16-kernels:", bf16Kernels,
                                          {"auto", "always"}))
    return e;
  if (given(bf16Kernels) && precision != "bf16")
    return optionError(bf16Kernels, "only used with --precision=bf16");
  if (given(bf16Attention) && precision != "bf16")
    return optionError(bf16Attention, "only used with --precision=bf16");
  if (given(expertParallel)) {
    if (llvm::Error e = ::vmoe::checkRange("--expert-parallel:",
                                           expertParallel, 1,
                                           ::vmoe::limits::kMaxDimension))
      return e;
    if (cuda)
      return optionError(expertParallel, "only the cpu target runs over MPI");
    if (emit == Emit::Lib)
      return optionError(expertParallel,
                         "needs --emit=exe (the MPI main) or an earlier "
                         "stage, not --emit=lib");
  }
  if (given(seed) && !training)
    return optionError(seed, "only used with --training");
  if (isModel)
    return llvm::Error::success();
  if (emit == Emit::Lib || emit == Emit::Exe)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--emit=lib and --emit=exe need a model "
                                   "description, not a .mlir module");
  for (const cl::Option *option : std::initializer_list<const cl::Option *>{
           &routing, &score, &capacityRatio, &maxCapacityRatio, &capacityRule,
           &numChoices, &groupSize, &groupsPerBatch, &training, &precision,
           &bf16Attention})
    if (given(*option))
      return optionError(*option, "only used with a model description, not "
                                  "a .mlir module");
  return llvm::Error::success();
}

/// Whether some MoE layer of `model` reads the `moe` field an override
/// option sets: `reads(layer)` for the layer's settings, unless its
/// moe.overrides entry sets the field itself (`overridden(entry)`).
static bool someLayerReads(
    const frontend::ModelDescription &model,
    llvm::function_ref<bool(const frontend::MoESettings &)> reads,
    llvm::function_ref<bool(const frontend::MoEOverride &)> overridden) {
  for (int64_t block : model.moeBlocks()) {
    const frontend::MoEOverride *entry = nullptr;
    for (const frontend::MoEOverride &candidate : model.moe.overrides)
      if (llvm::is_contained(candidate.blocks, block))
        entry = &candidate;
    if (!(entry && overridden(*entry)) && reads(model.layerSettings(block)))
      return true;
  }
  return false;
}

/// An override option no MoE layer reads is an error, not a silent no-op
/// (--k with expert choice routing, --score without BPR, ...).
static llvm::Error checkOverridesUsed(const frontend::ModelDescription &model) {
  using frontend::MoEOverride;
  using frontend::MoESettings;
  const cl::Option *moeOptions[] = {&routing,         &score,
                                    &capacityRatio,   &maxCapacityRatio,
                                    &capacityRule,    &numChoices,
                                    &groupSize};
  for (const cl::Option *option : moeOptions)
    if (given(*option) && (!model.hasMoE || model.moeBlocks().empty()))
      return optionError(*option, "the model has no MoE layer");
  auto never = [](const MoEOverride &) { return false; };
  if (given(routing) &&
      !someLayerReads(
          model, [](const MoESettings &) { return true; },
          [](const MoEOverride &e) { return e.routing.has_value(); }))
    return optionError(routing, "every MoE block sets its routing in "
                                "moe.overrides");
  if (given(numChoices) &&
      !someLayerReads(
          model, [](const MoESettings &l) { return l.isTokenChoice(); },
          [](const MoEOverride &e) { return e.k.has_value(); }))
    return optionError(numChoices,
                       "not used by routing \"" + model.moe.routing +
                           "\" (k is for token choice: vanilla or bpr)");
  if (given(score) &&
      !someLayerReads(
          model, [](const MoESettings &l) { return l.routing == "bpr"; },
          [](const MoEOverride &e) { return e.score.has_value(); }))
    return optionError(score, "not used by routing \"" + model.moe.routing +
                                  "\" (the score orders tokens for bpr)");
  // Capacity: token choice with a ratio and expert choice; not Soft MoE.
  auto hasCapacity = [](const MoESettings &l) { return l.routing != "soft"; };
  bool ratioUsed = !model.fixedCapacity() &&
                   someLayerReads(model, hasCapacity, never);
  for (const cl::Option *option :
       std::initializer_list<const cl::Option *>{&capacityRatio,
                                                 &maxCapacityRatio})
    if (given(*option) && !ratioUsed)
      return optionError(*option,
                         model.fixedCapacity()
                             ? "not used: the capacity is fixed "
                               "(moe.capacity or moe.capacity_ratio \"none\")"
                             : "not used: every MoE layer is Soft MoE (no "
                               "capacity)");
  if (given(capacityRule) &&
      !(ratioUsed &&
        someLayerReads(model, hasCapacity, [](const MoEOverride &e) {
          return e.capacityRule.has_value();
        })))
    return optionError(capacityRule,
                       "not used: no MoE layer rounds a capacity from the "
                       "ratio by moe.capacity_rule (fixed capacity, Soft "
                       "MoE, or rules set in moe.overrides)");
  return llvm::Error::success();
}

/// Applies the command-line overrides to `model`; errors name the option.
static llvm::Error applyOverrides(frontend::ModelDescription &model) {
  auto choose = [](cl::opt<std::string> &option, std::string &field,
                   llvm::ArrayRef<llvm::StringRef> choices) -> llvm::Error {
    if (option.getNumOccurrences() == 0)
      return llvm::Error::success();
    if (!llvm::is_contained(choices, option.getValue()))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "--" + option.ArgStr + ": unknown value '" + option.getValue() + "'");
    field = option.getValue();
    return llvm::Error::success();
  };
  frontend::MoESettings &moe = model.moe;
  if (llvm::Error e = choose(routing, moe.routing,
                             {"vanilla", "bpr", "expert_choice", "soft"}))
    return e;
  if (llvm::Error e = choose(score, moe.score, {"max", "sum_topk"}))
    return e;
  if (llvm::Error e = choose(capacityRule, moe.capacityRule, {"round", "ceil"}))
    return e;
  auto positive = [](auto &option, auto &field) -> llvm::Error {
    if (option.getNumOccurrences() == 0)
      return llvm::Error::success();
    if (!(option.getValue() > 0))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "--" + option.ArgStr + ": must be > 0");
    field = option.getValue();
    return llvm::Error::success();
  };
  if (capacityRatio.getNumOccurrences() && moe.capacity)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--capacity-ratio: the model has a fixed capacity (moe.capacity)");
  if (capacityRatio.getNumOccurrences() && moe.dropless)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--capacity-ratio: the model is dropless (moe.capacity_ratio "
        "\"none\")");
  if (llvm::Error e = positive(capacityRatio, moe.capacityRatio))
    return e;
  if (capacityRatio.getNumOccurrences())
    if (llvm::Error e =
            frontend::checkCapacityRatio("--capacity-ratio", capacityRatio))
      return e;
  // 0 (the default) means max(C, 2); given, it must be a ratio. The limit
  // is checked with the build options.
  if (maxCapacityRatio.getNumOccurrences())
    if (llvm::Error e = frontend::checkCapacityRatio("--max-capacity-ratio",
                                                     maxCapacityRatio))
      return e;
  if (llvm::Error e = positive(numChoices, moe.k))
    return e;
  if (groupSize.getNumOccurrences() && moe.groupTokens)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--group-size: the model's groups are counted in tokens "
        "(moe.group_tokens)");
  if (llvm::Error e = positive(groupSize, moe.groupSize))
    return e;
  if (llvm::Error e = checkOverridesUsed(model))
    return e;
  return frontend::validateModelDescription(model);
}

/// The default output name for `emit`.
static std::string defaultOutput(llvm::StringRef stem) {
  switch (emit) {
  case Emit::Mlir:
  case Emit::LlvmMlir:
    return "-";
  case Emit::Llvm:
    return (stem + ".ll").str();
  case Emit::Asm:
    return (stem + ".s").str();
  case Emit::Obj:
    return (stem + ".o").str();
  case Emit::Lib:
    return ("lib" + stem + ".so").str();
  case Emit::Exe:
    return stem.str();
  }
  llvm_unreachable("unknown emit kind");
}

/// Prints `op` to the output file.
static int printModule(ModuleOp module) {
  std::string error;
  auto output = openOutputFile(outputFile, &error);
  if (!output)
    return fail(error);
  module->print(output->os());
  output->keep();
  return 0;
}

/// The folder holding libvmoe_runtime.a and vmoe_runtime.link.
static std::string findRuntimeDir(const char *argv0) {
  if (!runtimeDir.empty())
    return runtimeDir;
  std::string self = llvm::sys::fs::getMainExecutable(
      argv0, reinterpret_cast<void *>(&findRuntimeDir));
  llvm::SmallString<256> dir(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(dir, "..", "lib");
  return std::string(dir);
}

/// Links `object` with the runtime into an executable or shared library.
static int link(const char *argv0, llvm::StringRef object) {
  std::string dir = findRuntimeDir(argv0);
  llvm::SmallString<256> linkFile(dir);
  llvm::sys::path::append(linkFile, "vmoe_runtime.link");
  auto buffer = llvm::MemoryBuffer::getFile(linkFile);
  if (!buffer)
    return fail("cannot read " + linkFile + " (the runtime link line; pass "
                "--runtime-dir)");
  llvm::ErrorOr<std::string> clang = llvm::sys::findProgramByName("clang-22");
  if (!clang)
    clang = llvm::sys::findProgramByName("clang", {"/usr/lib/llvm-22/bin"});
  if (!clang)
    return fail("clang-22 not found (it links the model)");
  std::vector<std::string> args = {*clang};
  if (emit == Emit::Lib)
    args.push_back("-shared");
  args.push_back(object.str());
  args.push_back("-o");
  args.push_back(outputFile);
  args.push_back("-L" + dir);
  // vmoe_runtime.link (and vmoe_cuda_runtime.link for CUDA models): one
  // argument per line; lines starting with "main:" only for executables.
  std::string linkText = (*buffer)->getBuffer().str();
  // The text of another link file of `dir`; `missing` says why it may lack.
  auto readLinkFile = [&](llvm::StringRef name,
                      llvm::StringRef missing) -> std::optional<std::string> {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    auto file = llvm::MemoryBuffer::getFile(path);
    if (!file) {
      fail("cannot read " + path + " (" + missing + ")");
      return std::nullopt;
    }
    return (*file)->getBuffer().str();
  };
  if (expertParallel > 0) {
    // The MPI main (lib/Runtime/MPI) replaces the runtime's "main:" lines.
    std::optional<std::string> mpi = readLinkFile(
        "vmoe_mpi_runtime.link", "this build has no MPI runtime: install "
                                 "openmpi-bin libopenmpi-dev and reconfigure");
    if (!mpi)
      return 1;
    std::string kept;
    llvm::SmallVector<llvm::StringRef> runtimeLines;
    llvm::StringRef(linkText).split(runtimeLines, '\n', -1, false);
    for (llvm::StringRef line : runtimeLines)
      if (!line.trim().starts_with("main:"))
        kept += line.str() + "\n";
    linkText = *mpi + "\n" + kept;
  }
  if (target == "cuda") {
    std::optional<std::string> cuda = readLinkFile(
        "vmoe_cuda_runtime.link",
        "this build has no CUDA runtime: configure with the CUDA toolkit");
    if (!cuda)
      return 1;
    linkText += "\n" + *cuda;
    if (gpuEmulate) {
      std::optional<std::string> emulator =
          readLinkFile("vmoe_gpu_emulator.link", "this build has no GPU emulator");
      if (!emulator)
        return 1;
      linkText += "\n" + *emulator;
    }
  }
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(linkText).split(lines, '\n', -1, false);
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (line.empty() || line.starts_with("#"))
      continue;
    if (line.consume_front("main:")) {
      if (emit == Emit::Exe)
        args.push_back(line.trim().str());
      continue;
    }
    args.push_back(line.str());
  }
  llvm::SmallVector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::string error;
  int status = llvm::sys::ExecuteAndWait(*clang, argRefs, std::nullopt, {}, 0,
                                         0, &error);
  if (status != 0)
    return fail("linking failed" + (error.empty() ? "" : ": " + error));
  if (emit == Emit::Lib) {
    // Ship the C API header next to the library.
    llvm::SmallString<256> header(dir);
    llvm::sys::path::append(header, "vmoe_runtime.h");
    llvm::SmallString<256> dest(llvm::sys::path::parent_path(outputFile));
    llvm::sys::path::append(dest, "vmoe_runtime.h");
    if (llvm::sys::fs::exists(header))
      if (std::error_code ec = llvm::sys::fs::copy_file(header, dest))
        return fail("cannot copy " + header + ": " + ec.message());
  }
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  // The NVVM pipeline parses upstream passes by name.
  registerAllPasses();
  // The MLIR and LLVM debugging options stay usable, listed by --help-hidden.
  cl::HideUnrelatedOptions(category);
  if (std::optional<std::string> error = ::vmoe::parseCommandLineOneLine(
          argc, argv,
          "vmoe-compile: V-MoE model description -> executable, library, "
          "object, LLVM IR or MLIR\n"))
    return fail(*error);
  bool isModel = llvm::sys::path::extension(inputFile) != ".mlir";
  if (llvm::Error e = checkOptions(isModel))
    return fail(llvm::toString(std::move(e)));
  // The host's target machine (also for --target=cuda: the host code), so
  // that --mcpu and --mattr are checked whatever --emit says.
  if (llvm::Error e = mlir::vmoe::checkCPU(mcpu))
    return fail("--mcpu: " + llvm::toString(std::move(e)));
  if (llvm::Error e = mlir::vmoe::checkFeatures(mattr))
    return fail("--mattr: " + llvm::toString(std::move(e)));
  mlir::vmoe::CodegenOptions codegen;
  codegen.optLevel = optLevel;
  codegen.cpu = mcpu;
  codegen.features = mattr;
  auto machine = mlir::vmoe::createTargetMachine(codegen);
  if (!machine)
    return fail(llvm::toString(machine.takeError()));

  // f32 lanes of the CPU kernels' vectors.
  unsigned lanes =
      vectorWidth ? unsigned(vectorWidth)
      : (*machine)->getMCSubtargetInfo()->checkFeatures("+avx512f") ? 16
                                                                    : 8;

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllGPUToLLVMIRTranslations(registry);
  mlir::vmoe::registerVMoEDialects(registry);
  MLIRContext context(registry);

  auto input = llvm::MemoryBuffer::getFile(inputFile);
  if (!input)
    return fail(inputFile + ": " + input.getError().message());
  llvm::StringRef stem = llvm::sys::path::stem(inputFile);

  OwningOpRef<ModuleOp> module;
  if (isModel) {
    llvm::Expected<frontend::ModelDescription> model =
        frontend::parseModelDescription((*input)->getBuffer());
    if (!model)
      return fail(inputFile + ": " + llvm::toString(model.takeError()));
    if (llvm::Error e = applyOverrides(*model))
      return fail(inputFile + ": " + llvm::toString(std::move(e)));
    frontend::BuildOptions options;
    options.groupsPerBatch = groupsPerBatch;
    options.maxCapacityRatio = maxCapacityRatio;
    options.target = target;
    options.expertParallel = expertParallel;
    options.training = training;
    options.seed = seed;
    options.precision = precision;
    options.bf16Attention = bf16Attention;
    options.allTokenRows = allTokenRows;
    if (precision == "bf16" && target != "cuda") {
      // Whether bf16 pays on this CPU (BF16KernelChoice.h), said on stderr.
      mlir::vmoe::BF16KernelChoice choice = mlir::vmoe::chooseBF16Kernels(
          *(*machine)->getMCSubtargetInfo(), lanes,
          /*onHost=*/mcpu == "native" && mattr.empty(),
          bf16Kernels == "always",
          bf16Speedup > 0 ? std::optional<double>(bf16Speedup) : std::nullopt);
      if (!choice.bf16)
        options.precision = "f32";
      options.bf16Activations = choice.bf16 && choice.dot;
      llvm::WithColor::note(llvm::errs(), "vmoe-compile")
          << "--precision=bf16: "
          << (choice.bf16 ? (choice.dot ? "bf16 kernels with vdpbf16ps"
                                        : "bf16 kernels with shift + fma")
                          : "f32 kernels")
          << " (" << choice.reason << ")\n";
    }
    if (llvm::Error e = frontend::validateBuildOptions(*model, options))
      return fail(inputFile + ": " + llvm::toString(std::move(e)));
    module = frontend::buildModelModule(context, *model, options);
    if (failed(verify(*module)))
      return fail("the front end built invalid IR (a vmoe bug)");
  } else {
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(std::move(*input), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
    if (!module)
      return 1; // The parser printed the diagnostic.
  }
  if (outputFile.empty())
    outputFile = defaultOutput(isModel ? llvm::StringRef(stem) : stem);
  if (emit == Emit::Mlir)
    return printModule(*module);

  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return fail("bad pass manager options");
  if (target == "cuda") {
    mlir::vmoe::VMoENVVMPipelineOptions pipeline;
    pipeline.chip = gpuChip;
    pipeline.toolkit = cudaPath;
    pipeline.gpuMma = gpuMma;
    if (gpuEmulate)
      pipeline.format = "emulator";
    if (failed(mlir::vmoe::buildVMoENVVMPipeline(pm, pipeline)))
      return fail("the NVVM pipeline could not be built");
  } else {
    mlir::vmoe::VMoECPUPipelineOptions pipeline;
    pipeline.parallel = parallel;
    pipeline.dynamicSchedule = dynamicSchedule;
    pipeline.parallelLinalg = parallelLinalg;
    pipeline.prefetchPanels = prefetchPanels;
    pipeline.expertParallel = expertParallel;
    // Models link the runtime, whose buffer cache keeps the forward pass's
    // buffers between calls; a .mlir input may be linked without it.
    pipeline.cachedBuffers = isModel;
    // The runtime switches the stores (lib/Runtime/StreamingStores.cpp).
    pipeline.streamingStores = isModel && parallel && streamingStores;
    pipeline.vectorWidth = lanes;
    pipeline.bf16Dot =
        mlir::vmoe::chooseBF16Kernels(*(*machine)->getMCSubtargetInfo(), lanes,
                                      /*onHost=*/false, /*always=*/true,
                                      std::nullopt)
            .dot;
    mlir::vmoe::buildVMoECPUPipeline(pm, pipeline);
  }
  if (failed(pm.run(*module)))
    return 1; // The failing pass printed the diagnostic.
  if (emit == Emit::LlvmMlir)
    return printModule(*module);

  llvm::LLVMContext llvmContext;
  auto llvmModule =
      mlir::vmoe::translateAndOptimize(*module, llvmContext, **machine, optLevel);
  if (!llvmModule)
    return fail(llvm::toString(llvmModule.takeError()));
  if (emit == Emit::Llvm) {
    std::string error;
    auto output = openOutputFile(outputFile, &error);
    if (!output)
      return fail(error);
    (*llvmModule)->print(output->os(), nullptr);
    output->keep();
    return 0;
  }

  // Machine code: the output itself, or a temporary object to link.
  bool linkAfter = emit == Emit::Lib || emit == Emit::Exe;
  std::string objectPath = outputFile;
  if (linkAfter) {
    llvm::SmallString<256> temp;
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("vmoe-model", "o", temp))
      return fail("cannot create a temporary object: " + ec.message());
    objectPath = std::string(temp);
  }
  {
    std::string error;
    auto output = openOutputFile(objectPath, &error);
    if (!output)
      return fail(error);
    if (llvm::Error e = mlir::vmoe::emitMachineCode(**llvmModule, **machine,
                                              output->os(), emit == Emit::Asm))
      return fail(llvm::toString(std::move(e)));
    output->keep();
  }
  if (!linkAfter)
    return 0;
  int status = link(argv[0], objectPath);
  llvm::sys::fs::remove(objectPath);
  return status;
}
