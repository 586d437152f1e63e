//===- Passes.td - vmoe conversion passes ------------------*- tablegen -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_CONVERSION_PASSES_TD
#define VMOE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertVMoEToSCFPass
    : Pass<"convert-vmoe-to-scf", "::mlir::func::FuncOp"> {
  let summary = "Lower vmoe ops to linalg, scf, tensor, arith and math";
  let description = [{
    Rewrites every vmoe op into upstream tensor-level IR with the exact
    semantics of docs/Dialect.md: linalg contractions and reductions for the
    router and the expert MLPs, `scf.forall` over tokens for top-k and the BPR
    ranks, an `scf.forall` over groups whose sequential body fills the
    buffers choice by choice, and a per-token weighted gather for combine.
    Routing is exact and deterministic: BPR is a rank count (stable, NaN
    ranked last), so its result does not depend on the schedule.
    `vmoe.unpack_panels` feeding the B operand of a linalg contraction (a
    dense layer's constant kernel, also after `expert_ffn` became one) is
    folded into it: the contraction reads the panels through the map
    `(..., n floordiv L, k, n mod L)` when `vector-width` divides L; other
    uses get a copy to the plain layout. An `expert_ffn` whose second kernel
    is stored as bf16 pairs keeps its hidden as a bf16 tensor: the bias and
    activation round it (`arith.truncf`), the second contraction widens it
    (`arith.extf`), the values it would have rounded from an f32 hidden.

    Expert GEMMs on bf16 pair panels (`weight_storage = bf16_pairs`) form
    their products with `x86vector.avx512.dot` (vdpbf16ps) when `bf16-dot`
    is set -- the driver sets it from the target's features (AVX512_BF16) --
    and otherwise with a 16-bit shift and f32 `vector.fma`, which runs on
    any host.

    `vmoe.attention` with `bf16_products` becomes one `scf.forall` over
    images x heads whose body keeps an item on the stack (memref.alloca
    marked `vmoe.stack_scratch`, at most 512 KB; longer sequences use the
    linalg form): k's rows rounded to bf16 pairs, qᵀ's pair panels (the
    words of 16 queries transposed in registers, 64 shuffles per 16 x 16
    tile), the pair GEMM k·qᵀ (the scores transposed, the scale in its
    epilogue), the softmax of each query down the keys (lanes are queries:
    no horizontal reductions; the maximum by compare and select),
    the probabilities rounded to pairs, v's pair panels and the pair GEMM
    p·v; without `bf16_products` it becomes linalg contractions (k copied
    to kᵀ first) and a softmax.

    The GEMMs of the expert, expert choice and Soft MoE lowerings pack B
    (weights without `weight_panels`, Soft MoE's dispatch and combine
    weights) block by block into a `memref.alloca` of at most 512 KB
    between `llvm.intr.stacksave` and `llvm.intr.stackrestore`: on the
    stack of the thread running the block, never on the heap.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::vector::VectorDialect",
    "::mlir::x86vector::X86VectorDialect"
  ];
  let options = [
    Option<"lanes", "vector-width", "int64_t", /*default=*/"8",
           "f32 lanes per vector register of the fused expert kernels">,
    Option<"tileRows", "tile-rows", "int64_t", /*default=*/"6",
           "Rows of the register tile of the fused expert kernels">,
    Option<"tileVectors", "tile-vectors", "int64_t", /*default=*/"2",
           "Vectors per row of the register tile of the fused expert kernels">,
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "bf16 pair products with vdpbf16ps (x86vector.avx512.dot; the "
           "target has AVX512_BF16, and AVX512VL below 16 lanes) instead of "
           "shift + f32 fma">,
    Option<"prefetch", "prefetch", "bool", /*default=*/"false",
           "Expert GEMMs reading weight panels prefetch, per k, the next "
           "column panel's line (GEMMs of more rows than one tile), and at "
           "each tile's last block of k the "
           "plane rows its epilogue writes (MicrokernelShape::prefetch)">
  ];
}

def ConvertVMoEToGPUPass
    : Pass<"convert-vmoe-to-gpu", "::mlir::func::FuncOp"> {
  let summary = "Lower vmoe.fused_experts and vmoe.assign_slots to GPU kernels";
  let description = [{
    Lowers every `vmoe.fused_experts` to two `gpu.launch` GEMM kernels (one
    thread block per 64 x 64 tile, expert and group; shared-memory staging;
    fma accumulation in k order) whose rows are gathered through the slot
    tables and whose epilogues apply bias and activation, then bias, gate
    weight and the scatter to per-choice planes; a final elementwise pass
    adds each token's kept choices in choice order. Blocks past an expert's
    fill exit at once.

    Every `vmoe.assign_slots` becomes a per-expert prefix count: one warp
    per group and expert (4 warps per block, warps on grid x) walks the
    group's entries in priority order 32 at a time; the `nvvm.vote.sync`
    ballot of the lanes whose entry goes to the warp's expert and its
    population count below the lane give each entry its rank, which is its
    slot while below the capacity; the warp stops when its expert is full.
    Slots start at -1 (a fill kernel before).

    The other vmoe ops are left for convert-vmoe-to-scf, whose parallel
    loops the NVVM pipeline maps to GPU threads.

    `mma=tf32|bf16` emits the GEMMs on tensor cores instead
    (`nvvm.mma.sync`, lib/Codegen/GPUMmaGemm.cpp); `none` (the default) keeps
    the exact FP32 SIMT kernels. Ops without a GPU lowering (expert choice,
    Soft MoE) are an error.
  }];
  let options = [
    Option<"mma", "mma", "std::string", "\"none\"",
           "GEMM instructions: none (FP32 SIMT), tf32 or bf16 (mma.sync)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def VMoEVectorizeContractionsPass
    : Pass<"vmoe-vectorize-contractions", "::mlir::ModuleOp"> {
  let summary = "Lower buffer-level linalg contractions to a vector microkernel";
  let description = [{
    Rewrites every `linalg.generic` contraction on memrefs whose output and
    right-hand operand are contiguous along the output column dim (matmuls,
    batched matmuls, expert matmuls, attention times values) into loops
    around the register-blocked microkernel of `vmoe/Codegen/Microkernel.h`:
    per k, one broadcast of A per row and `tile-vectors` vector loads of B
    feed `tile-rows x tile-vectors` vector FMAs. Other contractions and all
    non-contractions are left for convert-linalg-to-loops. With `parallel`,
    large batched contractions (attention over images x heads, expert
    matmuls) split their batches across OpenMP threads (an `scf.parallel`
    over the batch dims, each iteration packing on its own thread's stack), and
    large single ones their column panels (bf16 pair GEMMs their blocks of
    rows, each thread rounding its own rows; a static N within one panel,
    such as a router's experts, its row tiles, one block per thread packing
    all of B), in as many blocks as the
    smallest multiple of `omp_get_max_threads()` (declared in the module
    when needed) that keeps a block within its bound, the panels or row
    tiles spread evenly over them: every thread gets the same work, where
    fixed-size blocks left a short last one; every output element keeps one
    writer and one summation order, so results do not depend on the thread
    count. A destination zero-filled right before (a `linalg.fill` of +0.0,
    only allocations and ops without memory effects between) loses the
    fill: the first block of k starts from zero registers instead of
    loading C. An all-parallel `linalg.generic` that finishes C in place
    right after (its only output C with the identity map; inputs other
    buffers read along C's dims, contiguous along its columns; a body of
    elementwise f32 arith/math ops: a bias, an activation) is folded into
    the stores of the last block of k and erased; so is one out of place
    whose inputs include C (identity map) and whose output is a bf16
    buffer of C's shape filled by a final `arith.truncf` (a dense MLP's
    hidden): the rounded registers go to that buffer (a static
    `memref.alloc` of it between the two moves above the GEMM). With the AVX-512 tile
    (8 x 3), a GEMM whose columns 4 vectors pad less (attention's 50 keys,
    64 channels; 512 and 2048 columns) takes 6 x 4, whether B is packed per
    call or read from panels (any panel width that is a multiple of the
    vector width serves any tile). A B operand read through a panel map
    `(..., n floordiv L, k, n mod L)` (constant weights stored packed,
    folded from `vmoe.unpack_panels` by convert-vmoe-to-scf) is streamed in
    place: no packing scratch and no copy on any call. A bf16 pair
    contraction (B read through `(..., n floordiv L, k floordiv 2, n mod
    L)` from bf16 pair panels, its body the pair product of
    vmoe/Codegen/BF16PairContraction.h, folded from `vmoe.unpack_panels
    {storage = bf16_pairs}`) rounds its A rows to bf16 pairs once per block
    of rows (a stack scratch of at most 128 KB), or reads them in place
    when A is stored as bf16 (even K), and steps over pairs of k:
    `x86vector.avx512.dot` with `bf16-dot`, else shift + f32 fma. A
    contraction whose body rounds both operands to bf16 (attention's
    products with --precision=bf16, vmoe/Codegen/BF16PairContraction.h)
    takes the same microkernel with B rounded into pair panels on the stack
    per call (static K and N, at most 256 KB of them). A body must be
    exactly one of these: casts in a plain multiply-add (which linalg's
    contraction check admits) leave the op alone. Pair
    contractions it cannot rewrite, and epilogues rounding to bf16, have
    their bf16 rounding expanded to
    integer arithmetic without `bf16-dot` (targets without bf16
    conversions). Any other B is
    packed per block of 256 x 256 into a `memref.alloca` scratch (between
    `llvm.intr.stacksave` and `llvm.intr.stackrestore`) on the stack of the
    thread computing the block: no heap allocation per call, batch or
    block.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
    "::mlir::x86vector::X86VectorDialect"
  ];
  let options = [
    Option<"lanes", "vector-width", "int64_t", /*default=*/"8",
           "f32 lanes per vector register (8: AVX2, 16: AVX-512)">,
    Option<"tileRows", "tile-rows", "int64_t", /*default=*/"6",
           "Rows of the register tile">,
    Option<"tileVectors", "tile-vectors", "int64_t", /*default=*/"2",
           "Vectors per row of the register tile">,
    Option<"parallel", "parallel", "bool", /*default=*/"false",
           "Split large contractions across threads (column panels, or "
           "row tiles where N fits one panel)">,
    Option<"prefetch", "prefetch", "bool", /*default=*/"false",
           "Contractions reading B in panels prefetch, per k, the next "
           "column panel's line (contractions of more rows than one tile), "
           "and at each tile's last block of k the "
           "lines of C and of an epilogue's residual "
           "(MicrokernelShape::prefetch)">,
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "bf16 pair contractions with vdpbf16ps (x86vector.avx512.dot; the "
           "target has AVX512_BF16, and AVX512VL below 16 lanes) instead of "
           "shift + f32 fma">
  ];
}

def VMoEVectorizeTransposesPass
    : Pass<"vmoe-vectorize-transposes", "::mlir::func::FuncOp"> {
  let summary = "Lower buffer-level transposing copies to 16 x 16 shuffle tiles";
  let description = [{
    Rewrites every `linalg.generic` on memrefs that copies 32-bit floats
    (one input, one output, all loops parallel, the body yields the input)
    through permutation maps whose innermost dims differ (the input is
    contiguous along one loop dim, the output along another: attention's
    copy of k to kᵀ) into loops over 16 x 16 tiles: 16 vector loads along
    the input's rows, a `vector.transpose` lowered to shuffles
    (`shuffle_16x16`), 16 vector stores along the output's rows; rows past
    the edge of the output's contiguous dim are clamped on load and masked
    on store, columns past the other edge masked on load and skipped on
    store. Loops over the elements, as convert-linalg-to-loops leaves them,
    are vectorized by LLVM with one gather or scatter per element. With
    `parallel`, a copy of 2^16 elements or more runs its other dims as an
    `scf.parallel`. Only with 16-lane vectors (AVX-512); other widths, other
    element types and copies that do not transpose are left alone.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
  let options = [
    Option<"lanes", "vector-width", "int64_t", /*default=*/"16",
           "f32 lanes per vector register: only 16 rewrites">,
    Option<"parallel", "parallel", "bool", /*default=*/"false",
           "Large copies run their other dims on OpenMP threads">
  ];
}

def ConvertVMoEToMPIRuntimePass
    : Pass<"convert-vmoe-to-mpi-runtime", "::mlir::ModuleOp"> {
  let summary = "Lower the expert parallelism ops to calls of the MPI runtime";
  let description = [{
    `vmoe.expert_shard` becomes a `tensor.extract_slice` at
    `vmoe_mpi_rank() * E / ranks`; `vmoe.exchange_dispatch` and
    `vmoe.exchange_combine` become calls of
    `vmoe_mpi_exchange_dispatch` / `vmoe_mpi_exchange_combine` (C interface,
    lib/Runtime/MPI/Exchange.cpp) on the operands' buffers and a fresh
    result buffer. The runtime exchanges the filled-row counts with
    `MPI_Alltoall` and the rows with `MPI_Alltoallv`; MLIR 22's `mpi`
    dialect has no all-to-all, hence the calls. Modules without these ops
    are left alone. Runs before convert-vmoe-to-scf.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // VMOE_CONVERSION_PASSES_TD
