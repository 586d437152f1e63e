//===- Main.cpp - main() of compiled vmoe model executables ---------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The command line of an executable from `vmoe-compile --emit=exe`: load the
// weights, read PNG or JPEG images of any size (from the command line or an
// image list with optional labels), classify them, print the top classes
// (named by the model or a --labels file), and optionally logits, routing
// statistics, accuracy and a throughput benchmark. It uses only the public
// C API (vmoe_runtime.h), and lives in its own library (vmoe_runtime_main)
// so that shared-library builds of a model carry no main().
//
// Every error is one line "error: ..." on stderr and exit status 1, checked
// before anything is printed on stdout; this includes the errors llvm::cl
// prints itself, which are captured while parsing (vmoe/Support/
// OneLineErrors.h).
//
//===----------------------------------------------------------------------===//

#include "Main.h"

#include "../AlignedBuffer.h"
#include "../Distributed.h"
#include "../StreamingStores.h"
#include "ImageList.h"
#include "Labels.h"

#include "vmoe/Dialect/VMoE/IR/Capacity.h"
#include "vmoe/Runtime/vmoe_runtime.h"
#include "vmoe/Support/Limits.h"
#include "vmoe/Support/OneLineErrors.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <malloc.h>

using namespace vmoe::runtime;
using llvm::StringRef;
using llvm::Twine;
namespace cl = llvm::cl;

static cl::OptionCategory modelCategory("Model options");

namespace {

/// --padding values (the C API's VMOE_PADDING_* modes).
enum PaddingMode : int {
  PaddingMasked = VMOE_PADDING_MASKED,
  PaddingZeros = VMOE_PADDING_ZEROS,
};

/// The command line options. Constructed in main() once LLVMSupport's own
/// options exist, because --stats replaces LLVM's option of that name.
struct Options {
  cl::list<std::string> images{cl::Positional,
                               cl::desc("<image (PNG or JPEG)>..."),
                               cl::cat(modelCategory)};
  cl::opt<std::string> weights{"weights",
                               cl::desc("Weights of the model (safetensors)"),
                               cl::value_desc("file"), cl::cat(modelCategory)};
  cl::opt<std::string> imageList{
      "image-list",
      cl::desc("Images to classify, one 'path [label]' per line; paths "
               "relative to the list's directory, '#' starts a comment"),
      cl::value_desc("file"), cl::cat(modelCategory)};
  cl::opt<double> capacityRatio{
      "capacity-ratio",
      cl::desc("Capacity ratio C of the MoE layers (default: the model's)"),
      cl::value_desc("C"), cl::cat(modelCategory)};
  cl::opt<unsigned> top{
      "top", cl::desc("Classes printed per image, most probable first "
                      "(default 1)"),
      cl::value_desc("N"), cl::init(1), cl::cat(modelCategory)};
  cl::opt<std::string> labels{
      "labels",
      cl::desc("Class names, one per line (e.g. an ImageNet label list); "
               "default: the model's"),
      cl::value_desc("file"), cl::cat(modelCategory)};
  cl::opt<bool> stats{"stats",
                      cl::desc("Print kept choices per expert and dropped "
                               "choices per MoE layer (with --bench: whether "
                               "the norms wrote with non-temporal stores)"),
                      cl::cat(modelCategory)};
  cl::opt<unsigned> bench{
      "bench",
      cl::desc("Then run all images N more times and print the median "
               "images/s and ms per batch"),
      cl::value_desc("N"), cl::init(0), cl::cat(modelCategory)};
  cl::opt<unsigned> threads{
      "threads", cl::desc("OpenMP threads (default: the OpenMP runtime's)"),
      cl::value_desc("N"), cl::cat(modelCategory)};
  cl::opt<bool> quiet{"quiet",
                      cl::desc("Print no header and no per-image lines"),
                      cl::cat(modelCategory)};
  cl::opt<PaddingMode> padding{
      "padding",
      cl::desc("Padding images of the last batch (all zero after "
               "normalization):"),
      cl::values(clEnumValN(PaddingMasked, "masked",
                            "masked out of routing: take no expert capacity "
                            "(default)"),
                 clEnumValN(PaddingZeros, "zeros",
                            "routed like real images, as in the original "
                            "V-MoE evaluation")),
      cl::init(PaddingMasked), cl::cat(modelCategory)};
  cl::opt<bool> losses{"losses",
                       cl::desc("Print the auxiliary losses of each MoE layer "
                                "(training graphs: vmoe-compile --training)"),
                       cl::cat(modelCategory)};
  cl::opt<bool> printLogits{"print-logits",
                            cl::desc("Print all logits of each image (%.9g)"),
                            cl::cat(modelCategory)};
};

/// Owns a vmoe_model.
struct ModelDeleter {
  void operator()(vmoe_model *model) const { vmoe_model_free(model); }
};
using ModelPtr = std::unique_ptr<vmoe_model, ModelDeleter>;

/// Size of the error buffers handed to the C API.
constexpr size_t kErrorSize = 1024;

} // namespace

/// Prints "error: <message>" on stderr (naming the rank under MPI), in
/// one write so that the lines of ranks failing at once do not interleave;
/// returns the exit status 1.
static int fail(const Twine &message) {
  printErrorLine(message.str());
  return 1;
}

/// The class names: those of --labels, else the model's, else none.
static llvm::Expected<std::vector<std::string>>
getClassNames(const Options &options, const vmoe_model *model) {
  int64_t classes = vmoe_model_classes(model);
  if (!options.labels.empty())
    return readLabels(options.labels, classes);
  std::vector<std::string> names;
  for (int64_t c = 0; c < classes; ++c)
    if (const char *name = vmoe_model_class_name(model, c))
      names.push_back(name);
  return names;
}

/// The class index of `label`: a class name, else a class number.
static std::optional<int64_t> resolveLabel(llvm::ArrayRef<std::string> names,
                                           int64_t classes, StringRef label) {
  for (auto [c, name] : llvm::enumerate(names))
    if (label == name)
      return static_cast<int64_t>(c);
  int64_t index = 0;
  if (!label.getAsInteger(10, index) && index >= 0 && index < classes)
    return index;
  return std::nullopt;
}

/// The name of class `c` (its number without names).
static std::string className(llvm::ArrayRef<std::string> names, int64_t c) {
  if (!names.empty())
    return names[c];
  return std::to_string(c);
}

/// The sort key of a logit: NaN ranks below every number.
static float rankKey(float logit) {
  return std::isnan(logit) ? -std::numeric_limits<float>::infinity() : logit;
}

/// Class indices by decreasing logit, the lower index first on ties.
static std::vector<int64_t> rankClasses(llvm::ArrayRef<float> logits) {
  std::vector<int64_t> order(logits.size());
  for (size_t c = 0; c < order.size(); ++c)
    order[c] = static_cast<int64_t>(c);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    float keyA = rankKey(logits[a]), keyB = rankKey(logits[b]);
    return keyA != keyB ? keyA > keyB : a < b;
  });
  return order;
}

/// Prints "<path>: <class> (<prob>), ..." for the `top` most probable
/// classes (softmax of the logits, in double).
static void printTopClasses(llvm::ArrayRef<std::string> names, StringRef path,
                            llvm::ArrayRef<float> logits, unsigned top) {
  double largest = *std::max_element(logits.begin(), logits.end());
  std::vector<double> probabilities;
  double sum = 0;
  for (float logit : logits) {
    probabilities.push_back(std::exp(static_cast<double>(logit) - largest));
    sum += probabilities.back();
  }
  std::vector<int64_t> order = rankClasses(logits);
  llvm::outs() << path << ": ";
  for (unsigned i = 0; i < top && i < order.size(); ++i) {
    if (i != 0)
      llvm::outs() << ", ";
    llvm::outs() << className(names, order[i]) << " ("
                 << llvm::format("%.4f", probabilities[order[i]] / sum) << ")";
  }
  llvm::outs() << "\n";
}

/// Prints the routing statistics of all MoE layers.
static void printRoutingStats(const vmoe_model *model,
                              llvm::ArrayRef<int32_t> stats, int64_t numImages,
                              double ratio) {
  int64_t batch = vmoe_model_batch_images(model);
  int64_t padding = (batch - numImages % batch) % batch;
  bool masked = vmoe_model_get_padding(model) == VMOE_PADDING_MASKED;
  llvm::outs() << "stats: " << numImages << " images + " << padding
               << " padding (" << (masked ? "masked" : "routed")
               << "), capacity ratio " << vmoe::formatShortest(ratio) << "\n";
  int64_t experts = vmoe_model_num_experts(model);
  for (int64_t layer = 0; layer < vmoe_model_num_moe_layers(model); ++layer) {
    llvm::ArrayRef<int32_t> row =
        stats.slice(layer * (experts + 1), experts + 1);
    StringRef routing = vmoe_model_moe_routing(model, layer);
    int64_t block = vmoe_model_moe_block(model, layer);
    if (routing == "expert_choice") {
      // row[j]: tokens taken by exactly j experts.
      int64_t tokens = 0;
      for (int32_t value : row)
        tokens += value;
      llvm::outs() << "stats: MoE block " << block
                   << " (expert choice): experts per token [";
      llvm::interleave(row, llvm::outs(), ", ");
      llvm::outs() << "], taken by no expert " << row.front() << "/" << tokens
                   << " = "
                   << llvm::format("%.2f",
                                   tokens ? 100.0 * row.front() / tokens : 0.0)
                   << "%\n";
      continue;
    }
    if (routing == "soft") {
      llvm::outs() << "stats: MoE block " << block
                   << " (soft): slots per expert [";
      llvm::interleave(row.drop_back(), llvm::outs(), ", ");
      llvm::outs() << "], nothing dropped\n";
      continue;
    }
    int64_t kept = 0;
    for (int32_t value : row.drop_back())
      kept += value;
    int64_t dropped = row.back();
    int64_t total = kept + dropped;
    llvm::outs() << "stats: MoE block " << vmoe_model_moe_block(model, layer)
                 << ": kept per expert [";
    llvm::interleave(row.drop_back(), llvm::outs(), ", ");
    llvm::outs() << "], dropped " << dropped << "/" << total << " = "
                 << llvm::format("%.2f", total ? 100.0 * dropped / total : 0.0)
                 << "%\n";
  }
}

/// The median of `values` (mean of the middle two for an even count).
static double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t middle = values.size() / 2;
  if (values.size() % 2 == 1)
    return values[middle];
  return (values[middle - 1] + values[middle]) / 2;
}

/// Runs all images `runs` times, batch by batch, and prints the median
/// throughput and batch latency.
static int runBenchmark(vmoe_model *model, llvm::ArrayRef<float> images,
                        int64_t numImages, double ratio, unsigned runs) {
  // Under MPI one call runs one batch on every rank (one step).
  int64_t batch = vmoe_model_batch_images(model) *
                  (getDistribution() ? getDistribution()->size() : 1);
  int64_t imageSize = vmoe_model_channels(model) * vmoe_model_height(model) *
                      vmoe_model_width(model);
  std::vector<float> logits(batch * vmoe_model_classes(model));
  std::vector<double> imagesPerSecond, msPerBatch;
  char error[kErrorSize];
  using Clock = std::chrono::steady_clock;
  for (unsigned run = 0; run < runs; ++run) {
    Clock::time_point runStart = Clock::now();
    for (int64_t start = 0; start < numImages; start += batch) {
      int64_t count = std::min(batch, numImages - start);
      Clock::time_point batchStart = Clock::now();
      if (vmoe_model_forward(model, images.data() + start * imageSize, count,
                             ratio, logits.data(), nullptr, error,
                             sizeof(error)))
        return fail(error);
      msPerBatch.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - batchStart)
              .count());
    }
    double seconds =
        std::chrono::duration<double>(Clock::now() - runStart).count();
    imagesPerSecond.push_back(numImages / std::max(seconds, 1e-9));
  }
  if (!isPrintingProcess())
    return 0;
  llvm::outs() << "bench: " << runs << " runs of " << numImages
               << " images in batches of " << batch << ": median "
               << llvm::format("%.1f", median(imagesPerSecond)) << " images/s, "
               << llvm::format("%.3f", median(msPerBatch)) << " ms per batch\n";
  return 0;
}

/// After --bench with --stats: whether the norms of the last forward pass
/// wrote with non-temporal stores, and the measurement behind it
/// (StreamingStores.h).
static void printStreamingStores() {
  double factor = lastCrossCoreWriteFactor();
  llvm::outs() << "stats: non-temporal norm stores "
               << (vmoe_streaming_stores ? "on" : "off");
  if (factor > 0)
    llvm::outs() << " (cross-core write factor " << llvm::format("%.1f", factor)
                 << ")";
  llvm::outs() << "\n";
}

/// Prints the importance, load and GShard losses of every MoE layer (means
/// over all routing groups of the run).
static void printLosses(const vmoe_model *model) {
  int64_t layers = vmoe_model_num_moe_layers(model);
  std::vector<double> losses(3 * layers);
  vmoe_model_losses(model, losses.data());
  for (int64_t layer = 0; layer < layers; ++layer)
    llvm::outs() << "losses: MoE block " << vmoe_model_moe_block(model, layer)
                 << ": importance " << llvm::format("%.9g", losses[3 * layer])
                 << ", load " << llvm::format("%.9g", losses[3 * layer + 1])
                 << ", gshard " << llvm::format("%.9g", losses[3 * layer + 2])
                 << " (means over the routing groups)\n";
}

/// Prints the header, one line per image, and the accuracy.
static void printResults(const Options &options, const vmoe_model *model,
                         llvm::ArrayRef<std::string> names,
                         llvm::ArrayRef<ImageEntry> entries,
                         llvm::ArrayRef<float> logits, double ratio) {
  if (!options.quiet)
    llvm::outs() << "model " << vmoe_model_name(model) << ": capacity ratio "
                 << vmoe::formatShortest(ratio) << ", batch "
                 << vmoe_model_batch_images(model) << " images, "
                 << vmoe_model_get_threads() << " threads\n";
  int64_t classes = vmoe_model_classes(model);
  auto top = static_cast<unsigned>(std::min<int64_t>(options.top, classes));
  int64_t labeled = 0, correct = 0;
  for (const auto &[index, entry] : llvm::enumerate(entries)) {
    llvm::ArrayRef<float> row = logits.slice(index * classes, classes);
    if (!options.quiet)
      printTopClasses(names, entry.path, row, top);
    if (options.printLogits) {
      llvm::outs() << entry.path << ": logits";
      for (float logit : row)
        llvm::outs() << " " << llvm::format("%.9g", logit);
      llvm::outs() << "\n";
    }
    if (entry.labelClass) {
      ++labeled;
      correct += rankClasses(row).front() == *entry.labelClass;
    }
  }
  if (labeled > 0)
    llvm::outs() << "accuracy: " << correct << "/" << labeled << " = "
                 << llvm::format("%.2f", 100.0 * correct / labeled) << "%\n";
}

/// What every process of an expert parallel run must share
/// (Distribution::agree): the images are one list, split by batches, rank
/// 0 prints them all. Per-process resources (--weights, image paths,
/// --threads) may differ.
static std::vector<RunSetting> runSettings(const Options &options,
                                           int64_t numImages, double ratio) {
  static const char *const kBools[] = {"false", "true"};
  static const char *const kPaddings[] = {"masked", "zeros"};
  static_assert(PaddingMasked == 0 && PaddingZeros == 1, "kPaddings order");
  auto flag = [](const cl::opt<bool> &option) {
    return option.getValue() ? 1.0 : 0.0;
  };
  return {{"the number of images", static_cast<double>(numImages)},
          {"--capacity-ratio", ratio},
          {"--padding", static_cast<double>(options.padding.getValue()),
           kPaddings},
          {"--bench", static_cast<double>(options.bench)},
          {"--top", static_cast<double>(options.top)},
          {"--stats", flag(options.stats), kBools},
          {"--losses", flag(options.losses), kBools},
          {"--print-logits", flag(options.printLogits), kBools},
          {"--quiet", flag(options.quiet), kBools}};
}

/// Runs the model as the options say; returns the exit status.
static int run(const Options &options) {
  if (options.weights.empty())
    return fail("--weights FILE is required");
  if (options.top < 1)
    return fail("--top must be >= 1");
  if (options.threads.getNumOccurrences() &&
      (options.threads < 1 || options.threads > vmoe::limits::kMaxThreads))
    return fail("--threads: must be in [1, " +
                llvm::Twine(vmoe::limits::kMaxThreads) + "], got " +
                llvm::Twine(options.threads.getValue()));

  std::vector<ImageEntry> entries;
  for (const std::string &path : options.images)
    entries.push_back({path, "", "", std::nullopt});
  if (!options.imageList.empty())
    if (llvm::Error error = readImageList(options.imageList, entries))
      return fail(llvm::toString(std::move(error)));
  if (entries.empty())
    return fail("no images: give PNG or JPEG files or --image-list FILE");

  char error[kErrorSize];
  ModelPtr model(
      vmoe_model_load(options.weights.c_str(), error, sizeof(error)));
  if (!model)
    return fail(error);
  if (options.threads.getNumOccurrences())
    vmoe_model_set_threads(static_cast<int>(options.threads));
  if (vmoe_model_set_padding(model.get(), options.padding, error,
                             sizeof(error)))
    return fail(error);
  if (options.losses && !vmoe_model_is_training(model.get()))
    return fail("--losses: the model is an inference graph (compile it with "
                "vmoe-compile --training --seed N)");
  double ratio = options.capacityRatio.getNumOccurrences()
                     ? options.capacityRatio.getValue()
                     : vmoe_model_default_capacity_ratio(model.get());
  if (vmoe_model_check_capacity_ratio(model.get(), ratio, error, sizeof(error)))
    return fail(error);
  llvm::Expected<std::vector<std::string>> names =
      getClassNames(options, model.get());
  if (!names)
    return fail(llvm::toString(names.takeError()));
  int64_t classes = vmoe_model_classes(model.get());
  for (ImageEntry &entry : entries) {
    if (entry.label.empty())
      continue;
    entry.labelClass = resolveLabel(*names, classes, entry.label);
    if (!entry.labelClass)
      return fail(entry.origin + ": label '" + entry.label +
                  "' is not a class name or number of the model");
  }

  // All images first, so that a bad one stops the run before any output.
  // Under MPI a process reads only the images of its batches.
  auto numImages = static_cast<int64_t>(entries.size());
  int64_t imageSize = vmoe_model_channels(model.get()) *
                      vmoe_model_height(model.get()) *
                      vmoe_model_width(model.get());
  int64_t batch = vmoe_model_batch_images(model.get());
  // 64-byte aligned (zeroed): the runtime passes full batches to the
  // compiled function as they are.
  AlignedBuffer<float> imageBuffer;
  if (!imageBuffer.allocate(numImages * imageSize))
    return fail("out of memory for " + llvm::Twine(numImages) + " images");
  llvm::MutableArrayRef<float> images(imageBuffer.get(), numImages * imageSize);
  for (const auto &[index, entry] : llvm::enumerate(entries))
    if (ownsImage(static_cast<int64_t>(index), batch) &&
        vmoe_load_image(model.get(), entry.path.c_str(),
                      images.data() + index * imageSize, error, sizeof(error)))
      return fail(error);
  // Under MPI: every process is ready and was given the same run, or all
  // stop (the failing one said why, or every one names the difference).
  if (!agreeToRun(true, runSettings(options, numImages, ratio)))
    return 1;

  std::vector<float> logits(numImages * vmoe_model_classes(model.get()));
  std::vector<int32_t> stats(vmoe_model_stats_size(model.get()));
  if (vmoe_model_forward(model.get(), images.data(), numImages, ratio,
                         logits.data(), stats.data(), error, sizeof(error)))
    return fail(error);
  if (isPrintingProcess()) {
    printResults(options, model.get(), *names, entries, logits, ratio);
    if (options.stats)
      printRoutingStats(model.get(), stats, numImages, ratio);
    if (options.losses)
      printLosses(model.get());
  }
  if (options.bench <= 0)
    return 0;
  if (int status =
          runBenchmark(model.get(), images, numImages, ratio, options.bench))
    return status;
  if (options.stats && isPrintingProcess())
    printStreamingStores();
  return 0;
}

/// Keeps freed memory in the heap. Compiled models allocate their
/// intermediate buffers per call; with glibc's defaults, buffers over
/// 128 KiB are mmap'ed and unmapped on every call, and the page faults that
/// zero them again cost more than the arithmetic of small models (digits:
/// 2.4 ms vs 1.1 ms per batch).
static void keepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20); // glibc's largest on 64-bit
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

int vmoe::runtime::runMain(int argc, char **argv) {
  keepFreedMemory();
  // LLVMSupport registers --stats (LLVM's statistics) on first use of the
  // option registry; the model's --stats takes its place.
  auto &registered = cl::getRegisteredOptions();
  if (auto it = registered.find("stats"); it != registered.end())
    it->second->removeArgument();
  Options options;
  cl::HideUnrelatedOptions(modelCategory);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "vmoe compiled model (runtime of vmoe-compile)\n";
  });
  if (std::optional<std::string> error = vmoe::parseCommandLineOneLine(
          argc, argv,
          "classify PNG and JPEG images with a compiled vmoe model\n\n"
          "Prints '<path>: <class> (<probability>)' per image.\n"))
    return fail(*error);
  return run(options);
}
