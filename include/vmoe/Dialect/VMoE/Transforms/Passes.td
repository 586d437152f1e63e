//===- Passes.td - vmoe dialect passes ---------------------*- tablegen -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_DIALECT_VMOE_TRANSFORMS_PASSES_TD
#define VMOE_DIALECT_VMOE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def VMoEBufferSizingPass
    : Pass<"vmoe-buffer-sizing", "::mlir::func::FuncOp"> {
  let summary = "Give every vmoe.dispatch a static per-expert capacity";
  let description = [{
    Computes the per-expert capacity `B = rule(k * S * C / E)` of every
    `vmoe.dispatch` that has none yet (docs/Dialect.md, capacity), records it
    as the `capacity` attribute and makes the buffer dimension static. The
    new static type flows into `vmoe.expert_ffn` results; other users keep
    the type they had through a `tensor.cast`. A runtime `capacity` operand
    stays: B is then the compiled maximum.

    Errors: a capacity that rounds to 0 ("capacity rounds to 0 ..."), and a
    dynamic S (tokens per group), which leaves nothing to size from.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
  let options = [
    Option<"capacityRatio", "capacity-ratio", "double", /*default=*/"0.0",
           "Capacity ratio C for every unsized dispatch (0: each op's own)">,
    Option<"multipleOf", "multiple-of", "int64_t", /*default=*/"0",
           "Round every capacity up to this multiple (0: each op's own)">
  ];
}

def VMoEFuseExpertsPass : Pass<"vmoe-fuse-experts", "::mlir::func::FuncOp"> {
  let summary = "Fuse dispatch, expert_ffn and combine into fused_experts; "
                "hand weight panels to the expert ops";
  let description = [{
    Rewrites `combine(expert_ffn(dispatch(x, ids, order)), ids, slots, w)`,
    when the buffers and the expert outputs have no other user, into
    `vmoe.assign_slots` (the routing half of dispatch: slots, per-expert slot
    tables and fill counts) and `vmoe.fused_experts` (gather, expert MLP and
    weighted combine of the filled rows only). The `E x G x B x D` buffers
    and expert outputs disappear; results are the same as the unfused ops.
    Needs static capacities (run vmoe-buffer-sizing first); chains whose
    intermediate values escape are left alone. When both expert weights
    come from `vmoe.unpack_panels` with one panel width L and one storage,
    the fused op takes the panels themselves (`weight_panels = L`, and
    `weight_storage` for bf16 pairs) and the unpack ops left without users
    are erased. Likewise `vmoe.expert_choice_experts` and `vmoe.soft_moe`
    whose w1 and w2 both come from f32 `vmoe.unpack_panels` of one width
    take the panels (`weight_panels = L`; bf16 pair panels stay unpacked,
    these ops have no bf16 GEMMs).
    The chain with
    `vmoe.expert_swiglu` in place of `expert_ffn` becomes a gated
    `fused_experts` (silu, `w_up`, zero biases; static E, D and H).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def VMoEFuseRoutingPass : Pass<"vmoe-fuse-routing", "::mlir::func::FuncOp"> {
  let summary = "Fuse route, bpr_sort and assign_slots into fused_route";
  let description = [{
    Rewrites `assign_slots(route(x).expert_ids, bpr_sort(route(x).gates))`
    (or without the order: vanilla routing) into one `vmoe.fused_route`
    that routes group by group, so the gates, scores and order of all groups
    are never materialized together. Applies when the gates feed nothing
    but the bpr_sort, the order nothing but the assign_slots, and the router
    has no training noise; other chains are left alone. Run after
    vmoe-fuse-experts, which creates the assign_slots.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def VMoEApproximateMathPass : Pass<"vmoe-approximate-math"> {
  let summary = "Replace transcendental math ops with polynomial approximations";
  let description = [{
    Rewrites `math.tanh`, `math.erf`, `math.exp`, `math.log` and friends,
    scalar or vector, into the upstream polynomial approximations (a few
    ulp in f32), so that loops over them vectorize instead of calling libm
    once per element. Other ops are left alone.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def VMoEUnshareFillInitsPass : Pass<"vmoe-unshare-fill-inits"> {
  let summary = "Give every destination-passing op a linalg.fill of its own";
  let description = [{
    CSE merges identical `tensor.empty` + `linalg.fill` pairs, so one filled
    tensor becomes the init (`outs`) of every GEMM or reduction of its
    shape. One-shot bufferization then fills one buffer and copies it into
    each destination (a `memcpy` of every qkv projection, attention score
    and MLP hidden tensor of the model: 3% of a V-MoE-S/32 forward). This
    pass clones the fill of a `tensor.empty`, and the empty tensor, right
    before each op that takes it as a destination operand, so that each
    destination is filled in place, next to its consumer, and
    `vmoe-vectorize-contractions` can start a GEMM whose destination was
    just zero-filled from zero accumulators instead. The original goes when
    nothing else uses it; uses that are not destination operands keep it,
    and fills of anything but a `tensor.empty` are left alone.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def VMoELowerStridedCopiesPass : Pass<"vmoe-lower-strided-copies"> {
  let summary = "Turn memref.copy between non-contiguous buffers into loops";
  let description = [{
    Bufferization copies into strided views (inserting the class token into
    the token tensor, for instance) as `memref.copy`, which the LLVM lowering
    turns into a call to `memrefCopy` from MLIR's C runner utilities.
    Compiled models must not need that library, so every copy that is not
    between two contiguous buffers becomes a `linalg.copy` (loops, which
    LLVM vectorizes); contiguous copies stay and become `memcpy`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def VMoEGPUDeviceBuffersPass
    : Pass<"vmoe-gpu-device-buffers", "::mlir::func::FuncOp"> {
  let summary = "Host-side buffers of the GPU path become device memory";
  let description = [{
    Runs after the loops became `gpu.launch` ops. Host code keeps its buffers
    on the device (never managed memory): `memref.alloc` / `memref.dealloc`
    become `gpu.alloc` / `gpu.dealloc` (no `host_shared`), `memref.copy`
    becomes `gpu.memcpy`, and a constant (`memref.get_global`) read by a
    kernel gets a device copy made once per call. Allocations inside
    kernels (per-thread scratch, static shapes only) become `memref.alloca`,
    the thread's private memory. A host `memref.load` whose value only one
    later kernel uses (and nothing in between touches the memref) moves into
    that kernel. A `memref.load` or `memref.store` left in host code is an
    error (it would read device memory from the host).
    `gpu-async-region` afterwards puts all of it on one stream.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def VMoEDeallocAtExitPass
    : Pass<"vmoe-dealloc-at-exit", "::mlir::func::FuncOp"> {
  let summary = "Free the function's top-level buffers before it returns";
  let description = [{
    The GPU path cannot use the ownership-based deallocation pipeline (GPU
    launches and barriers have no declared memory effects). Its host code is
    straight-line with destination-passing results, so every `memref.alloc`
    in the entry block of a function is freed right before each return. An
    allocation that escapes (returned, or stored into memory) is an error;
    nested allocations are left for promote-buffers-to-stack.
  }];
}

def VMoEContractToFMAPass : Pass<"vmoe-contract-to-fma"> {
  let summary = "acc + a * b -> math.fma(a, b, acc) for f32";
  let description = [{
    Rewrites `arith.addf(acc, arith.mulf(a, b))` (the mulf used once) into
    `math.fma(a, b, acc)`. The CPU microkernel accumulates contractions with
    fma; applying this before GPU code generation makes GPU contractions
    round the same way, so that routing decisions agree exactly across
    backends.
  }];
  let dependentDialects = ["::mlir::math::MathDialect"];
}

def VMoEGPULinalgToLoopsPass
    : Pass<"vmoe-gpu-linalg-to-loops", "::mlir::func::FuncOp"> {
  let summary = "Buffer-level linalg ops to loops shaped for GPU mapping";
  let description = [{
    A linalg op nested in a parallel loop (scf.forall / scf.parallel) becomes
    sequential loops (it runs inside one GPU thread); any other becomes an
    scf.parallel over its parallel dims (a kernel of its own) with its
    reductions sequential inside. Then scf.forall becomes scf.parallel.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect"];
}

def VMoEGPUContractionsPass
    : Pass<"vmoe-gpu-contractions", "::mlir::func::FuncOp"> {
  let summary = "Buffer-level f32 contractions to tiled GEMM kernels";
  let description = [{
    Rewrites every buffer-level linalg op (generic or named) that is an f32
    contraction into one tiled GEMM `gpu.launch` (vmoe/Codegen/GPUGemm.h:
    64 x 64 tiles of the output per block, A and B staged through shared
    memory), the kernel the expert GEMMs of `convert-vmoe-to-gpu` use. This
    covers the dense MLP, the qkv and out projections, attention's Q K^T
    and P V and the head, which `vmoe-gpu-linalg-to-loops` would otherwise
    run as one thread per output element with the whole sum in the thread.

    An op is rewritten when it has two f32 memref inputs and one f32 memref
    output, projected-permutation indexing maps, a body `acc + a * b` or
    `math.fma(a, b, acc)` (a, b the input elements, acc the output's), and
    exactly one reduction dim k, indexing both inputs and not the output.
    Every parallel dim must index the output. Among the parallel dims, those
    indexing one input and not the other are row (m) or column (n)
    candidates; there must be some of each. n is the candidate innermost in
    the output (its input is B), m the innermost candidate of the other
    input (A); every other parallel dim is a batch dim, linearized into the
    kernel's batch index (the innermost fastest) and recovered by division.
    Operands are read through the op's indexing maps, so strided, permuted
    and transposed views are read in place; staging reads k with
    neighbouring threads when k is the operand's last index. As linalg
    defines it, the sum starts from the output's value and is accumulated
    in k order (with `mma=none`, fma for fma: results equal the loops the
    op would otherwise become). An output that was just set to +0.0 (a
    `linalg.fill` of it, or a `memref.copy` into it from a buffer so
    filled, with nothing in between writing it; the output a fresh
    allocation) is not read: the sums start from 0.0, and the fill or copy
    is erased unless something read the output in between (the kernel
    writes every element).

    Left alone: ops nested in `scf.forall`, `scf.parallel` or a kernel (they
    run inside one thread), other element types, other bodies, several or
    no reduction dims, products without a row or a column dim (matrix-vector
    products), tensors, and outputs that are views of an input.

    `mma=tf32|bf16` emits tensor-core kernels (`nvvm.mma.sync`) instead of
    FP32 SIMT, except for contractions marked `vmoe.router_logits` (the
    router product of convert-vmoe-to-scf), which stay on FP32 products:
    routing decisions (top-k, the BPR order, capacity drops) depend on the
    logits' exact values. Run it after bufferization and
    `vmoe-contract-to-fma`, before `vmoe-gpu-linalg-to-loops`.
  }];
  let options = [
    Option<"mma", "mma", "std::string", "\"none\"",
           "GEMM instructions: none (FP32 SIMT), tf32 or bf16 (mma.sync)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::nvgpu::NVGPUDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def VMoEGPUAlignWorkgroupMemoryPass
    : Pass<"vmoe-gpu-align-workgroup-memory", "::mlir::ModuleOp"> {
  let summary = "Align the workgroup (shared) buffers of every GPU kernel";
  let description = [{
    Runs after `gpu-kernel-outlining`. Every workgroup attribution of a
    `gpu.func` gets the `llvm.align` attribute `alignment` (or keeps a
    larger one), which `convert-gpu-to-nvvm` turns into the alignment of
    its `.shared` variable. Without it a `memref<...xf32>` attribution is
    declared `.align 4`, and the 16-byte accesses of the GEMM kernels
    (`cp.async` of 16 bytes, `ldmatrix`, 64- and 128-bit shared loads and
    stores) would be misaligned whenever ptxas places the variable at an
    address that is not a multiple of 16. Private attributions are left
    alone.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"16",
           "Least byte alignment of each workgroup buffer (a power of two)">
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def VMoEGPUMergeKernelModulesPass
    : Pass<"vmoe-gpu-merge-kernel-modules", "::mlir::ModuleOp"> {
  let summary = "Merge the outlined gpu.module ops into one";
  let description = [{
    gpu-kernel-outlining gives every launch a gpu.module of its own, which
    serialization turns into one PTX module or cubin each. This pass moves
    the contents of every gpu.module into the first one, renaming a symbol
    whose name is taken there (`name_0`, `name_1`, ...), and points each
    gpu.launch_func at the merged module, so that one PTX module or cubin
    holds all kernels (vmoe-translate `--vmoe-to-ptx`, `--vmoe-to-cubin`).
    The modules must carry the same attributes: run it before
    nvvm-attach-target; modules that differ are an error.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def VMoEGPUEmulateKernelsPass
    : Pass<"vmoe-gpu-emulate-kernels", "::mlir::ModuleOp"> {
  let summary = "Compile the NVVM kernels for the host CPU (the GPU emulator)";
  let description = [{
    Runs where `gpu-module-to-binary` would, on gpu.module ops already
    lowered to the LLVM and NVVM dialects (`convert-gpu-to-nvvm`). Every
    function and global of a gpu.module moves into the host module under a
    prefixed name; NVVM's special registers, barriers and warp-level
    instructions (`mma.sync`, `ldmatrix`, `cp.async`, `shfl.sync`,
    `vote.sync`) become calls of the emulator's functions
    (include/vmoe/Runtime/GPUEmulator/vmoe_gpu_emulator.h); shared and
    global address spaces become the host's; each kernel gets an entry that
    takes cuLaunchKernel's argument array, registered with the shared
    variables from a global constructor. The gpu.module becomes a
    gpu.binary whose object names the registration, so `gpu-to-llvm` and
    the vmoe CUDA runtime run unchanged: loaded against
    libvmoe_gpu_emulator.so as the driver, the kernels run on the CPU, one
    fiber per thread (docs/GPU.md, "The emulator"). An NVVM operation
    without an emulation is an error.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::NVVM::NVVMDialect"];
}

def VMoEExpertParallelPass
    : Pass<"vmoe-expert-parallel", "::mlir::func::FuncOp"> {
  let summary = "Split the experts of each token choice MoE layer over ranks";
  let description = [{
    Expert parallelism (SPEC §10, docs/Distributed.md): every process (MPI
    rank) routes its own tokens, and the E experts of each layer are split
    over `ranks` processes, E / ranks each. Rewrites every
    `combine(expert_ffn(dispatch(...)))` chain into

      dispatch -> exchange_dispatch -> expert_ffn on the rank's
      expert_shard of each weight -> exchange_combine -> combine

    numbering the layers in order (`layer`). Routing, capacity and drops
    stay local, so results are bit for bit those of one process. Run it
    after vmoe-buffer-sizing and before vmoe-fuse-experts (which then leaves
    the chains alone). An expert_ffn outside such a chain (a dense MLP)
    stays as it is, computed by every rank on its own rows. Errors: E not
    divisible by `ranks`; expert choice or Soft MoE layers (not supported
    under expert parallelism).
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"1",
           "Processes the experts are split over (E must be divisible)">
  ];
}

def VMoEGPUMapParallelLoopsPass
    : Pass<"vmoe-gpu-map-parallel-loops", "::mlir::func::FuncOp"> {
  let summary = "Map every top-level scf.parallel to one gpu.launch";
  let description = [{
    Each top-level `scf.parallel` (not inside a kernel or another parallel
    loop) becomes a `gpu.launch` that runs all of its iterations: the
    iteration space of every dim together is linearized, split over
    `threads-per-block` threads per block and as many blocks as it needs
    (grid x only, at most `max-blocks`), and a grid-stride loop covers what
    one launch cannot. So no dim is left to one thread, and grid y and z
    stay 1, below their 65,535 limit, whatever the shape. Each thread
    recovers its indices by division (the last dim varies fastest, so
    neighbouring threads touch neighbouring elements). Nested parallel loops
    run sequentially in the thread. Loops with reductions are an error.
    Other top-level ops of the function with regions that read or write
    memory (a sequential `scf.for`, `scf.if`) and lone `memref.store` ops
    move into a one-thread `gpu.launch`: host code never touches device
    memory.
  }];
  let options = [
    Option<"threadsPerBlock", "threads-per-block", "int64_t", "256",
           "Threads of each block">,
    Option<"maxBlocks", "max-blocks", "int64_t", "2147483647",
           "Most blocks of one launch (grid x limit: 2^31 - 1)">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def VMoEClaimOMPIterationsPass
    : Pass<"vmoe-claim-omp-iterations", "::mlir::func::FuncOp"> {
  let summary = "Take a dynamic OpenMP loop's iterations from a shared "
                "counter";
  let description = [{
    An `omp.wsloop schedule(dynamic)` (no chunk size, no reduction) that is
    the only work of its `omp.parallel` region becomes a loop in that region
    in which every thread claims the next iteration with one atomic add on a
    counter that the function zeroes before the region: the dynamic
    schedule's order and balance, without libomp's dispatch (per thread and
    loop an init; per claimed iteration a call that, in Debian's libomp,
    also formats debug strings) and without the loop's closing barrier (the
    region's join is one). Each iteration writes its own outputs
    (vmoe-balance-omp-loops schedules only such loops dynamically), so the
    result does not depend on which thread took which. Loops of several
    dims (collapsed) take the linear iteration number apart. The counter is
    one `i64` on the function's stack, allocated in its entry block.
  }];
  let dependentDialects = ["::mlir::omp::OpenMPDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::memref::MemRefDialect"];
}

def VMoEBalanceOMPLoopsPass : Pass<"vmoe-balance-omp-loops"> {
  let summary = "Schedule OpenMP loops of unequal iterations dynamically";
  let description = [{
    `convert-scf-to-openmp` emits every `omp.wsloop` without a schedule, so
    libomp splits its iterations into one contiguous chunk per thread. That
    split suits loops whose iterations take the same time, and it hands
    each thread the same share of rows in every such loop, so that a
    thread reads the rows it wrote itself (from its own caches, not from
    the other core's); but some parallel loops of vmoe-lower-to-cpu have
    few, unequal iterations: the experts of a MoE layer, with different
    fills, or the groups of a routing step. This pass sets
    `schedule(dynamic)` (chunks of one iteration) on every `omp.wsloop`
    that has no schedule, no reduction, at most `max-iterations` iterations
    (or an unknown count) and iterations that may differ: threads take the
    next iteration when they finish one. A loop keeps the static split when
    its iterations are uniform (every loop bound and branch condition in
    its body is computed, without reading memory, from values defined
    above the loop: attention's images x heads, equal chunks of rows of a
    norm)
    or when its trip count comes from `omp_get_max_threads` (the balanced
    blocks of a GEMM, sized for the threads). Longer loops (routing over
    tokens) keep the static split too, which costs no atomic operation per
    iteration. Each iteration writes its own outputs, so the result does
    not depend on the schedule. Loops with a reduction keep the static
    schedule (their partial sums, and so the rounding of the result, would
    depend on which thread took which iteration), as do loops that already
    have a schedule.
  }];
  let dependentDialects = ["::mlir::omp::OpenMPDialect"];
  let options = [
    Option<"maxIterations", "max-iterations", "int64_t", /*default=*/"256",
           "Loops with more iterations (a constant count) stay static">
  ];
}

def VMoEParallelLinalgPass : Pass<"vmoe-parallel-linalg", "::mlir::func::FuncOp"> {
  let summary = "Run large linalg ops on buffers over chunks of rows in parallel";
  let description = [{
    After bufferization, the linalg ops the microkernel does not take
    (layer norms, softmax, bias and residual adds, activations, copies) are
    lowered to sequential loops: on 2 threads, ~6% of a V-MoE-S/32 forward
    ran on one thread. This pass splits every such op with at least
    `min-work` iterations (static loop ranges) along its first parallel dim
    of size >= 2 (all dims before it parallel) into `chunks` equal chunks,
    an `scf.parallel` over the chunks around the op on subviews
    (`linalg::tileLinalgOp`), which convert-scf-to-openmp runs on threads;
    convert-linalg-to-loops then lowers the op inside to sequential loops
    whose innermost dim LLVM vectorizes as before. Every output element is
    computed by one iteration in the same order as before (reduction dims
    are never split), so results do not change and do not depend on the
    thread count. Ops nested in a parallel loop, ops with dynamic leading
    dims and small ops are left alone.
  }];
  let dependentDialects = [
    "::mlir::affine::AffineDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
  let options = [
    Option<"minWork", "min-work", "int64_t", /*default=*/"65536",
           "Smallest product of the loop ranges that is split">,
    Option<"chunks", "chunks", "int64_t", /*default=*/"16",
           "Chunks of the split dim (iterations of the parallel loop)">
  ];
}

def VMoEStreamingStoresPass : Pass<"vmoe-streaming-stores", "::mlir::ModuleOp"> {
  let summary = "Row-wise outputs written with non-temporal stores when the "
                "runtime asks for them";
  let description = [{
    A layer norm's output is read in full by every thread of the GEMM after
    it (the GEMM splits its column panels), so the next call's layer norm
    overwrites lines the other cores hold. On some hosts (two vCPUs in
    different core complexes) such a write costs 16-18x a private one, not
    5x, and the 15 normalize regions of a V-MoE-S/32 forward at two threads
    take 0.17 ms each instead of 0.03; non-temporal stores write them in
    0.02-0.03 ms in either case, but the next GEMM then reads its operand
    from memory (-0.5% where the writes are cheap). So the choice is made
    at run time: the runtime measures the host (vmoe_streaming_stores,
    lib/Runtime/StreamingStores.cpp) and sets the external i32 global
    `vmoe_streaming_stores` that this pass declares.

    Every `linalg.generic` on buffers marked `vmoe.streaming_stores` (the
    frontend marks the normalize step of its norms) that is elementwise
    over two parallel dims, writes an output whose rows are contiguous,
    whose row stride is a multiple of 64 bytes and whose last dim is a
    static multiple of `lanes`, reads its inputs through the maps (d0, d1),
    (d0) or (d1), and whose body holds only elementwise arith / math ops,
    becomes
    `scf.if (flag != 0 && output 64-byte aligned) { rows x vectors of
    lanes, vector.store {nontemporal} } else { the op }`. The vector loop
    applies the body's ops to vectors in the same order, so both branches
    compute the same values bit for bit. Anything else is left alone (the
    mark is dropped).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
  let options = [
    Option<"lanes", "lanes", "int64_t", /*default=*/"16",
           "f32 lanes per vector store (16: AVX-512, 8: AVX2)">
  ];
}

#endif // VMOE_DIALECT_VMOE_TRANSFORMS_PASSES_TD
