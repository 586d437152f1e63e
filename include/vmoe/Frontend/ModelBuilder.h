//===- ModelBuilder.h - V-MoE description -> MLIR ---------------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Builds the whole model of a description as one MLIR module: the forward
// function of docs/ModelFormat.md §5 in upstream tensor/linalg ops plus vmoe
// ops for the MoE layers, and the manifest the runtime reads.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_FRONTEND_MODELBUILDER_H
#define VMOE_FRONTEND_MODELBUILDER_H

#include "vmoe/Frontend/ModelDescription.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace mlir {
class DialectRegistry;
class MLIRContext;
} // namespace mlir

namespace mlir::vmoe::frontend {

/// Compile-time choices that are not part of the description.
struct BuildOptions {
  /// Routing groups per compiled batch (N = groups * group_size images).
  int64_t groupsPerBatch = 1;
  /// The largest capacity ratio the model may run at; buffers are sized for
  /// it. 0 picks max(C, 2).
  double maxCapacityRatio = 0;
  /// Where the compiled code runs: "cpu" or "cuda" (recorded in the
  /// manifest: the runtime gives a CUDA model managed memory).
  std::string target = "cpu";
  /// MPI ranks the experts of each MoE layer are split over (0: one
  /// process); recorded in the manifest, see docs/Distributed.md.
  int64_t expertParallel = 0;
  /// A training graph (`vmoe-compile --training`): noisy gating with the
  /// counter-based noise of `seed` in every MoE layer, and the auxiliary
  /// losses as an output (docs/ModelFormat.md "Training graphs").
  bool training = false;
  uint64_t seed = 0;
  /// Number format of the weights: "f32" or "bf16" (panel-packed expert
  /// and dense kernels stored as bf16 pairs, SPEC §9; docs/ModelFormat.md
  /// §5).
  std::string precision = "f32";
  /// With precision "bf16": the blocks' attention products q kᵀ and p v
  /// multiply operands rounded to bf16 (f32 sums); else they stay f32.
  bool bf16Attention = true;
  /// With precision "bf16" and bf16 attention products on the CPU: the qkv
  /// projection rounds q, k and v into bf16 tensors, which the attention
  /// reads as they are (set where the target rounds to bf16 in one
  /// instruction, AVX512_BF16; else they stay f32 and the attention
  /// rounds them: the same values).
  bool bf16Activations = false;
  /// Compute every token's row in the last block even where only the class
  /// token reaches the head (head `token`). Off by default: the last block
  /// then skips the rows nothing reads (docs/ModelFormat.md §5).
  bool allTokenRows = false;
};

/// Images per compiled batch.
int64_t batchImages(const ModelDescription &model,
                    const BuildOptions &options);

/// The capacity ratio the buffers are sized for.
double maxCapacityRatio(const ModelDescription &model,
                        const BuildOptions &options);

/// Checks `options` against `model` (a maximum below the default C, a
/// capacity that rounds to 0); errors name the option.
llvm::Error validateBuildOptions(const ModelDescription &model,
                                 const BuildOptions &options);

/// The manifest JSON of docs/ModelFormat.md §5.
std::string buildManifest(const ModelDescription &model,
                          const BuildOptions &options);

/// The dialects the built module uses.
void registerFrontendDialects(DialectRegistry &registry);

/// Width of the GEMM panels constant weights are stored in (docs/
/// ModelFormat.md §5): a multiple of the 8- and 16-lane vectors.
constexpr int64_t kWeightPanelWidth = 16;

/// Whether weight tensor `name` of `shape` is stored in panel layout in the
/// weights buffer (packed once by the runtime at load, read in place by the
/// GEMMs) on the CPU target: the dense kernels `*.kernel` [K, N] but the
/// routers, when N is a multiple of kWeightPanelWidth, and the expert
/// kernels w1, w2 of token choice, expert choice and Soft MoE layers when D
/// and H are (not under expert parallelism).
bool isPanelPackedWeight(const ModelDescription &model,
                         const BuildOptions &options, llvm::StringRef name,
                         llvm::ArrayRef<int64_t> shape);

/// Whether weight tensor `name` of `shape` is stored as bf16 pair panels
/// ([..., ceil(N/L), ceil(K/2), L] words of two bf16, written by the runtime
/// at load into the first words of the tensor's f32 region): with
/// precision "bf16", the expert kernels w1, w2 of token choice MoE layers
/// on the CPU target without expert parallelism, when the packed words of
/// both kernels fit their regions, and the dense kernels stored in panel
/// layout (`*.kernel` [K, N] but the routers, N a multiple of L).
bool isBF16PanelWeight(const ModelDescription &model,
                       const BuildOptions &options, llvm::StringRef name,
                       llvm::ArrayRef<int64_t> shape);

/// Width of the f32 panels the expert kernels of token choice layers are
/// stored in, where D and H are multiples of it: one 16-lane microkernel
/// tile of 4 vectors, so that a tile reads 256 contiguous bytes per k and
/// a GEMM of one row tile streams the weights as one sequence.
constexpr int64_t kExpertPanelWidth = 64;

/// The panel width of weight tensor `name` when isPanelPackedWeight:
/// kExpertPanelWidth for the f32 expert kernels of token choice layers
/// whose D and H it divides, else kWeightPanelWidth.
int64_t weightPanelWidth(const ModelDescription &model,
                         const BuildOptions &options, llvm::StringRef name,
                         llvm::ArrayRef<int64_t> shape);

/// Words of a [..., K, N] matrix stored as bf16 pair panels of width L:
/// ceil(N/L) * L * ceil(K/2) per matrix.
int64_t bf16PanelWords(llvm::ArrayRef<int64_t> shape, int64_t width);

/// Builds `@vmoe_forward` and `@vmoe_model_manifest` for `model`.
OwningOpRef<ModuleOp> buildModelModule(MLIRContext &context,
                                       const ModelDescription &model,
                                       const BuildOptions &options);

} // namespace mlir::vmoe::frontend

#endif // VMOE_FRONTEND_MODELBUILDER_H
