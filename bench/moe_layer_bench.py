"""Benchmark of one V-MoE layer: compiled vmoe code against PyTorch eager.

    /usr/bin/python3 bench/moe_layer_bench.py [--vmoe-opt build/bin/vmoe-opt]
        [--repeats N] [--threads 1,2] [--sizes s32-g1,s32-g4,s32-t1600,b-g1]
        [--json bench/results.json] [--quick] [--workdir DIR]

The layer (SPEC section 3): route (softmax, then top-2), bpr_sort (BPR, max
score), dispatch with capacity ratio C = 1.05 (B static after sizing),
expert_ffn (gelu_tanh) and combine. For every size and thread count it
times, each in a fresh child process:

  vmoe fused      `vmoe-lower-to-cpu{parallel=true}` (fuse=true and
                  prefetch-panels=true, the defaults),
                  expert weights packed once into the GEMM panel layout
                  (numpy, in the child before timing, as the model runtime
                  does at load) and passed through vmoe.unpack_panels, so
                  the expert GEMMs read them in place
  vmoe repack     the same with plain weights: the expert GEMMs repack
                  them into panels on every call (the code before weights
                  were packed once)
  vmoe unfused    `vmoe-lower-to-cpu{parallel=true fuse=false}`
  vmoe bf16       `vmoe-compile --precision=bf16`'s layer: the fused
                  pipeline on expert weights packed once as bf16 pair
                  panels (vmoe.unpack_panels {storage = bf16_pairs}, the
                  runtime's layout), rows rounded to bf16, f32
                  accumulation with vdpbf16ps when the host has
                  AVX512_BF16 (`bf16-dot=true`), else shift + fma
  vmoe bf16 shift only on hosts with AVX512_BF16: the same with
                  `bf16-dot=false`, the shift + fma code other CPUs get
  torch tutel     routing with vectorized torch ops (cumsum slots), rows
                  gathered into [E, G*B, D], baddbmm + gelu + baddbmm,
                  index_add_ of the weighted rows back
  torch einsum    GShard / vmoe (JAX) style: dense dispatch and combine
                  tensors [G, S, E, B], einsum dispatch, MLP and combine
  torch loop      per expert: index_select its tokens, two torch.addmm,
                  index_add_ back
  torch bf16      the tutel style with the expert GEMMs in bf16 (weights
                  converted once before timing, rows and hidden converted
                  per call, torch.bmm in bf16, bias and gelu in f32);
                  routing in f32 as in vmoe bf16
  sgemm roofline  torch.matmul (OpenBLAS) of the same expert FLOPs as one
                  large GEMM pair [E*G*B, D] x [D, H], [E*G*B, H] x [H, D]

The compiled rows use 16-lane vectors (`vector-width=16`) when the host
has AVX-512 (avx512f in /proc/cpuinfo), else 8 (AVX2); clang compiles for
-march=native either way. Each child loads the inputs, takes a peak-RSS baseline, warms up, times
`--repeats` calls (perf_counter) and reports the median and its peak extra
RSS (ru_maxrss minus the baseline). The compiled children never import
torch (libomp of LLVM and torch's libgomp stay apart); OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS and torch.set_num_threads set the thread count (torch
children also get OMP_WAIT_POLICY=PASSIVE, see child_environment). The
compiled modules also hold `@moe_routing` (route + bpr_sort +
assign_slots), timed for a routing / expert breakdown and used to check
that compiled and torch routing agree slot for slot.

Checks (exit status 1 on failure): compiled routing slots equal torch's;
fused vs unfused output max relative error < 1e-5; every torch style vs
fused < 1e-4; the bf16 rows vs fused < 6e-2 (bf16 rounding of weights and
rows: up to 2^-8 relative per product; measured 2.1e-2 for vmoe bf16 and
2.8e-2 for torch bf16, which also rounds its GEMM outputs to bf16). The relative error is check_layers' measure,
max |a - b| / (|b| + 0.1 * max|b|). Tool failures exit with status 2. One
error line is printed in both cases.
"""

import argparse
import ctypes
import functools
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_BENCH_DIR)
_PYTHON_DIR = os.path.join(_REPO, "python")
sys.path.insert(0, _PYTHON_DIR)

from vmoe_tools.memref import as_memref  # noqa: E402

_LLVM_LIB = "/usr/lib/llvm-22/lib"
_TOOL_TIMEOUT_S = 600
_CHILD_TIMEOUT_S = 900

# Layer sizes: G routing groups of S tokens, width D, hidden H, E experts.
SIZES = {
    "s32-g1": dict(G=1, S=400, D=512, H=2048, E=32, k=2, C=1.05),
    "s32-g4": dict(G=4, S=400, D=512, H=2048, E=32, k=2, C=1.05),
    "s32-t1600": dict(G=1, S=1600, D=512, H=2048, E=32, k=2, C=1.05),
    "b-g1": dict(G=1, S=400, D=768, H=3072, E=8, k=2, C=1.05),
}

def _host_has(flag):
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return flag in line.split()
    except OSError:
        pass
    return False


VECTOR_WIDTH = 16 if _host_has("avx512f") else 8
# vdpbf16ps for the bf16 row, as vmoe-compile decides from the target.
BF16_DOT = _host_has("avx512_bf16") and (
    VECTOR_WIDTH == 16 or _host_has("avx512vl"))
PIPELINES = {
    "vmoe fused": "vmoe-lower-to-cpu{parallel=true vector-width=%d}",
    "vmoe repack": "vmoe-lower-to-cpu{parallel=true vector-width=%d}",
    # The fused row with one lowering choice flipped, for its effect in the
    # same run: static OpenMP split; no prefetch of the next weight panel.
    "vmoe static":
        "vmoe-lower-to-cpu{parallel=true vector-width=%d "
        "dynamic-schedule=false}",
    "vmoe no prefetch":
        "vmoe-lower-to-cpu{parallel=true vector-width=%d "
        "prefetch-panels=false}",
    "vmoe unfused":
        "vmoe-lower-to-cpu{parallel=true fuse=false vector-width=%d}",
    "vmoe bf16": "vmoe-lower-to-cpu{parallel=true vector-width=%d "
                 "bf16-dot=" + ("true" if BF16_DOT else "false") + "}",
}
if BF16_DOT:
    PIPELINES["vmoe bf16 shift"] = ("vmoe-lower-to-cpu{parallel=true "
                                    "vector-width=%d bf16-dot=false}")
PIPELINES = {k: v % VECTOR_WIDTH for k, v in PIPELINES.items()}
# Rows whose expert weights arrive in the GEMM panel layout (packed once),
# as f32 or as bf16 pairs.
PACKED = ("vmoe fused", "vmoe static", "vmoe no prefetch")
# Rows whose output must equal `vmoe fused` bit for bit.
EXACT = ("vmoe repack", "vmoe static", "vmoe no prefetch")
BF16_PACKED = tuple(p for p in PIPELINES if p.startswith("vmoe bf16"))
PANEL_WIDTH = 16  # kWeightPanelWidth of the frontend
TORCH_STYLES = ("torch tutel", "torch einsum", "torch loop")
TORCH_BF16_STYLES = ("torch bf16",)
# Optional peers run by another Python with PyTorch 2.x (--peer-python,
# scripts/bench_peers.sh): the tutel style eager and under torch.compile;
# and the layer in JAX under XLA:CPU (bench/jax_moe.py) where that Python
# has jax.
PEER_STYLES = ("torch2 tutel", "torch2 compile")
JAX_STYLE = "jax xla"
ROOFLINE = "sgemm roofline"
IMPLEMENTATIONS = (*PIPELINES, *TORCH_STYLES, *TORCH_BF16_STYLES, ROOFLINE)

FUSED_VS_UNFUSED_RTOL = 1e-5
TORCH_VS_FUSED_RTOL = 1e-4
BF16_VS_FUSED_RTOL = 6e-2
_ERROR_FLOOR = 0.1
# Distinct gates of a token, or BPR scores of a group, closer than this
# (relative, in float64) could be ordered differently by f32 kernels.
_SEPARATION = 1e-6
_MAX_DRAWS = 200
# (max - min) / median of the timed calls above which a table is flagged.
_NOISY_SPREAD = 0.2


class BenchError(Exception):
    """A failure to report as one line; `status` is the exit status."""

    def __init__(self, message, status=2):
        super().__init__(message)
        self.status = status


# ------------------------------------------------------------------ inputs

def capacity(size):
    """B = round(k*S*C/E), ties to even, evaluated left to right in f64."""
    import vmoe_ref.ops as ref  # the project's reference capacity rule
    return ref.sized_capacity(size["k"], size["S"], size["C"], size["E"])


def _routing_is_robust(x, router, k):
    """Whether f32 rounding cannot change top-k choices or the BPR order."""
    logits = x.astype(np.float64) @ router.astype(np.float64)
    gates = np.exp(logits - logits.max(-1, keepdims=True))
    gates /= gates.sum(-1, keepdims=True)
    ranked = -np.sort(-gates, axis=-1)[..., :k + 1]
    step = ranked[..., :-1] - ranked[..., 1:]
    if np.any(step <= _SEPARATION * ranked[..., :-1]):
        return False
    scores = np.sort(ranked[..., 0], axis=-1)  # BPR score: the max gate
    gap = scores[..., 1:] - scores[..., :-1]
    return not np.any(gap <= _SEPARATION * scores[..., 1:])


def draw_inputs(name, size):
    """Float32 inputs of `size`, deterministic (seeded by the sizes).

    x ~ N(0, 1) and router ~ N(0, 1/D) (redrawn until routing is robust,
    see _routing_is_robust); expert weights ~ N(0, 1/fan_in); biases
    ~ N(0, 0.02^2). The weights depend on (D, H, E) only, so s32-g1 and
    s32-g4 share them.
    """
    G, S, D, H, E, k = (size[n] for n in "GSDHEk")
    for attempt in range(_MAX_DRAWS):
        rng = np.random.default_rng([G, S, D, E, attempt])
        x = rng.standard_normal((G, S, D), dtype=np.float32)
        router = rng.standard_normal((D, E), dtype=np.float32)
        router *= np.float32(1 / np.sqrt(D))
        if _routing_is_robust(x, router, k):
            break
    else:
        raise BenchError(f"{name}: no robust routing in {_MAX_DRAWS} draws")
    rng = np.random.default_rng([D, H, E])
    w1 = rng.standard_normal((E, D, H), dtype=np.float32)
    w1 *= np.float32(1 / np.sqrt(D))
    w2 = rng.standard_normal((E, H, D), dtype=np.float32)
    w2 *= np.float32(1 / np.sqrt(H))
    b1 = rng.standard_normal((E, H), dtype=np.float32) * np.float32(0.02)
    b2 = rng.standard_normal((E, D), dtype=np.float32) * np.float32(0.02)
    return dict(x=x, router=router, w1=w1, b1=b1, w2=w2, b2=b2)


INPUT_NAMES = ("x", "router", "w1", "b1", "w2", "b2")


def load_inputs(data_dir):
    return {n: np.load(os.path.join(data_dir, n + ".npy"))
            for n in INPUT_NAMES}


def pack_panels(w, width=PANEL_WIDTH):
    """[E, K, N] -> [E, N/L, K, L]: packed[e, n / L, k, n % L] = w[e, k, n]
    (vmoe.unpack_panels, docs/ModelFormat.md section 5)."""
    E, K, N = w.shape
    return np.ascontiguousarray(
        w.reshape(E, K, N // width, width).transpose(0, 2, 1, 3))


def pack_bf16_pairs(w, width=PANEL_WIDTH):
    """[E, K, N] f32 -> [E, N/L, K/2, L] f32 words of bf16 pairs (K even):
    word [e, n / L, j, n % L] holds bf16(w[e, 2j, n]) in its low and
    bf16(w[e, 2j + 1, n]) in its high 16 bits, rounded to nearest even
    (vmoe.unpack_panels {storage = bf16_pairs}, the runtime's
    BF16Panels.cpp)."""
    E, K, N = w.shape
    bits = w.astype(np.float32).view(np.uint32).astype(np.uint64)
    bf16 = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(
        np.uint32)
    words = bf16[:, 0::2, :] | (bf16[:, 1::2, :] << 16)      # [E, K/2, N]
    words = words.reshape(E, K // 2, N // width, width).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(words).view(np.float32)


# -------------------------------------------------------------------- MLIR

def emit_mlir(size, B, packed=False, bf16=False):
    """`@moe_layer` (the whole layer, out in destination-passing style) and
    `@moe_routing` (route + bpr_sort + assign_slots: slots and fill). With
    `packed`, w1 and w2 arrive in the panel layout of pack_panels; with
    `bf16` too, as the bf16 pair panels of pack_bf16_pairs."""
    G, S, D, H, E, k = (size[n] for n in "GSDHEk")
    L = PANEL_WIDTH
    t_x, m_x = f"tensor<{G}x{S}x{D}xf32>", f"memref<{G}x{S}x{D}xf32>"
    t_r = f"tensor<{D}x{E}xf32>"
    t_g, t_w = f"tensor<{G}x{S}x{E}xf32>", f"tensor<{G}x{S}x{k}xf32>"
    t_ids, m_ids = f"tensor<{G}x{S}x{k}xi32>", f"memref<{G}x{S}x{k}xi32>"
    t_ord = f"tensor<{G}x{S}xi32>"
    t_buf = f"tensor<{E}x{G}x?x{D}xf32>"
    t_ent = f"tensor<{E}x{G}x{B}xi32>"
    t_fill, m_fill = f"tensor<{E}x{G}xi32>", f"memref<{E}x{G}xi32>"
    weights = (f"tensor<{E}x{D}x{H}xf32>, tensor<{E}x{H}xf32>, "
               f"tensor<{E}x{H}x{D}xf32>, tensor<{E}x{D}xf32>")
    w_types = weights.split(", ")
    unpack = ""
    arg_types = list(w_types)
    if packed:
        rows1, rows2 = (D // 2, H // 2) if bf16 else (D, H)
        storage = (" {storage = #vmoe.panel_storage<bf16_pairs>}" if bf16
                   else "")
        arg_types[0] = f"tensor<{E}x{H // L}x{rows1}x{L}xf32>"
        arg_types[2] = f"tensor<{E}x{D // L}x{rows2}x{L}xf32>"
        unpack = f"""\
  %w1 = vmoe.unpack_panels %w1p{storage} : {arg_types[0]} -> {w_types[0]}
  %w2 = vmoe.unpack_panels %w2p{storage} : {arg_types[2]} -> {w_types[2]}
"""
    w1_arg, w2_arg = ("%w1p", "%w2p") if packed else ("%w1", "%w2")
    routing = f"""\
  %gates, %ids, %weights = vmoe.route %x, %router {{k = {k} : i64}}
      : {t_x}, {t_r} -> {t_g}, {t_ids}, {t_w}
  %order = vmoe.bpr_sort %gates : {t_g} -> {t_ord}"""
    return f"""\
// vmoe moe_layer_bench: G={G} S={S} D={D} H={H} E={E} k={k} C={size['C']}
// (B = {B} after sizing), BPR with the max score, gelu_tanh experts.
func.func @moe_layer(%x: {t_x}, %router: {t_r},
    {w1_arg}: {arg_types[0]}, %b1: {w_types[1]},
    {w2_arg}: {arg_types[2]}, %b2: {w_types[3]},
    %out_dest: {m_x}) attributes {{llvm.emit_c_interface}} {{
{unpack}{routing}
  %buffers, %slots = vmoe.dispatch %x, %ids, %order
      {{capacity_ratio = {float(size['C'])!r} : f64}}
      : {t_x}, {t_ids}, {t_ord} -> {t_buf}, {t_ids}
  %y = vmoe.expert_ffn %buffers, %w1, %b1, %w2, %b2
      : {t_buf}, {weights}
  %out = vmoe.combine %y, %ids, %slots, %weights
      : {t_buf}, {t_ids}, {t_ids}, {t_w} -> {t_x}
  bufferization.materialize_in_destination %out in restrict writable
      %out_dest : ({t_x}, {m_x}) -> ()
  return
}}

func.func @moe_routing(%x: {t_x}, %router: {t_r},
    %slots_dest: {m_ids}, %fill_dest: {m_fill})
    attributes {{llvm.emit_c_interface}} {{
{routing}
  %slots, %entries, %fill = vmoe.assign_slots %ids, %order
      : {t_ids}, {t_ord} -> {t_ids}, {t_ent}, {t_fill}
  bufferization.materialize_in_destination %slots in restrict writable
      %slots_dest : ({t_ids}, {m_ids}) -> ()
  bufferization.materialize_in_destination %fill in restrict writable
      %fill_dest : ({t_fill}, {m_fill}) -> ()
  return
}}
"""


def _run_tool(stage, command, log_path):
    """Runs a compiler tool; raises BenchError (status 2) on failure."""
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=_TOOL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise BenchError(f"{stage} failed: {error}")
    if done.returncode != 0:
        with open(log_path, "w") as f:
            f.write(done.stderr)
        first = (done.stderr.strip().splitlines() or ["(no stderr)"])[0]
        raise BenchError(f"{stage} failed (exit {done.returncode}): {first} "
                         f"[full log: {log_path}]")
    return time.perf_counter() - start


def compile_module(mlir_path, pipeline, out_dir, args, vmoe_opt=None):
    """vmoe-opt → mlir-translate → clang; returns (library, seconds)."""
    lowered = os.path.join(out_dir, "lowered.mlir")
    ll = os.path.join(out_dir, "layer.ll")
    library = os.path.join(out_dir, "layer.so")
    log = os.path.join(out_dir, "error.log")
    seconds = _run_tool("vmoe-opt", [
        vmoe_opt or args.vmoe_opt, mlir_path,
        f"--pass-pipeline=builtin.module({pipeline})", "-o", lowered], log)
    seconds += _run_tool("mlir-translate", [
        args.mlir_translate, "--mlir-to-llvmir", lowered, "-o", ll], log)
    seconds += _run_tool("clang", [
        args.clang, "-O3", "-march=native", "-shared", "-fPIC",
        "-Wno-override-module", ll, "-o", library, f"-L{_LLVM_LIB}",
        f"-Wl,-rpath,{_LLVM_LIB}", "-lomp", "-lm"], log)
    return library, seconds


# ------------------------------------------------- PyTorch implementations
# These functions run in the torch children (and the routing once in the
# parent, for the slot check); torch is imported lazily.

def torch_routing(x, router, k, B):
    """(ids, weights, slots), each [G, S, k], computed with vectorized ops.

    gates = softmax(x @ router); top-k after softmax; BPR order = tokens by
    descending max gate (stable sort); slots by a cumsum over the one-hot
    experts of the choices in dispatch order (choice-major, then priority),
    -1 where the expert's count passed B.
    """
    import torch
    import torch.nn.functional as F
    G, S, _ = x.shape
    E = router.shape[1]
    gates = torch.softmax(torch.matmul(x, router), dim=-1)
    weights, ids = torch.topk(gates, k, dim=-1)
    order = torch.sort(weights[..., 0], dim=-1, descending=True,
                       stable=True).indices                      # [G, S]
    by_rank = order.unsqueeze(-1).expand(G, S, k)
    queue = torch.gather(ids, 1, by_rank).transpose(1, 2).reshape(G, k * S)
    onehot = F.one_hot(queue, E)                                 # [G, kS, E]
    position = torch.cumsum(onehot, dim=1).gather(
        2, queue.unsqueeze(-1)).squeeze(-1) - 1                  # [G, kS]
    queued_slots = torch.where(position < B, position,
                               torch.full_like(position, -1))
    queued_slots = queued_slots.view(G, k, S).transpose(1, 2)   # rank order
    slots = torch.empty_like(queued_slots).scatter_(1, by_rank, queued_slots)
    return ids, weights, slots


def _kept_choices(ids, weights, slots):
    """Flat (token, expert, slot, weight, group) of the kept choices."""
    import torch
    G, S, k = ids.shape
    kept = slots >= 0
    token = torch.arange(G * S).view(G, S, 1).expand(G, S, k)[kept]
    group = torch.arange(G).view(G, 1, 1).expand(G, S, k)[kept]
    return token, ids[kept], slots[kept], weights[kept], group


def moe_tutel(x, router, w1, b1, w2, b2, k, B):
    """Tutel-like: gather rows into [E, G*B, D], batched GEMMs, index_add_."""
    import torch
    import torch.nn.functional as F
    G, S, D = x.shape
    E = w1.shape[0]
    token, expert, slot, weight, group = _kept_choices(
        *torch_routing(x, router, k, B))
    row = (expert * G + group) * B + slot           # row of [E, G, B]
    x_flat = x.reshape(G * S, D)
    buffers = x.new_zeros(E * G * B, D)
    buffers.index_copy_(0, row, x_flat.index_select(0, token))
    h = torch.baddbmm(b1.unsqueeze(1), buffers.view(E, G * B, D), w1)
    h = F.gelu(h, approximate="tanh")
    y = torch.baddbmm(b2.unsqueeze(1), h, w2).view(E * G * B, D)
    out = x.new_zeros(G * S, D)
    out.index_add_(0, token, y.index_select(0, row) * weight.unsqueeze(1))
    return out.view(G, S, D)


def moe_tutel_bf16(x, router, w1, b1, w2, b2, k, B):
    """moe_tutel with the expert GEMMs in bf16: w1, w2 arrive in bf16; the
    gathered rows and the hidden rows are converted per call; routing,
    biases and gelu in f32."""
    import torch
    import torch.nn.functional as F
    G, S, D = x.shape
    E = w1.shape[0]
    token, expert, slot, weight, group = _kept_choices(
        *torch_routing(x, router, k, B))
    row = (expert * G + group) * B + slot
    x_flat = x.reshape(G * S, D)
    buffers = x.new_zeros(E * G * B, D)
    buffers.index_copy_(0, row, x_flat.index_select(0, token))
    h = torch.bmm(buffers.view(E, G * B, D).to(torch.bfloat16), w1)
    h = F.gelu(h.float() + b1.unsqueeze(1), approximate="tanh")
    y = torch.bmm(h.to(torch.bfloat16), w2).float() + b2.unsqueeze(1)
    y = y.view(E * G * B, D)
    out = x.new_zeros(G * S, D)
    out.index_add_(0, token, y.index_select(0, row) * weight.unsqueeze(1))
    return out.view(G, S, D)


def moe_einsum(x, router, w1, b1, w2, b2, k, B):
    """GShard / vmoe-like: dense [G, S, E, B] dispatch and combine tensors."""
    import torch
    import torch.nn.functional as F
    E = w1.shape[0]
    ids, weights, slots = torch_routing(x, router, k, B)
    kept = slots >= 0
    expert_mask = F.one_hot(ids, E).to(x.dtype) * (
        weights * kept).unsqueeze(-1)                      # [G, S, k, E]
    slot_mask = F.one_hot(slots.clamp(min=0), B).to(x.dtype)  # [G, S, k, B]
    combine = torch.einsum("gske,gskc->gsec", expert_mask, slot_mask)
    dispatch = (combine > 0).to(x.dtype)
    inputs = torch.einsum("gsec,gsd->egcd", dispatch, x)
    h = torch.einsum("egcd,edh->egch", inputs, w1) + b1[:, None, None, :]
    h = F.gelu(h, approximate="tanh")
    y = torch.einsum("egch,ehd->egcd", h, w2) + b2[:, None, None, :]
    return torch.einsum("gsec,egcd->gsd", combine, y)


def moe_loop(x, router, w1, b1, w2, b2, k, B):
    """Per-expert loop: index_select, addmm, gelu, addmm, index_add_."""
    import torch
    import torch.nn.functional as F
    G, S, D = x.shape
    E = w1.shape[0]
    token, expert, _, weight, _ = _kept_choices(
        *torch_routing(x, router, k, B))
    by_expert = torch.sort(expert, stable=True).indices
    token, weight = token[by_expert], weight[by_expert]
    counts = torch.bincount(expert, minlength=E).tolist()
    x_flat = x.reshape(G * S, D)
    out = x.new_zeros(G * S, D)
    start = 0
    for e, count in enumerate(counts):
        if count == 0:
            continue
        rows = token[start:start + count]
        h = F.gelu(torch.addmm(b1[e], x_flat.index_select(0, rows), w1[e]),
                   approximate="tanh")
        y = torch.addmm(b2[e], h, w2[e])
        out.index_add_(0, rows, y * weight[start:start + count, None])
        start += count
    return out.view(G, S, D)


_TORCH_FUNCTIONS = {"torch tutel": moe_tutel, "torch einsum": moe_einsum,
                    "torch loop": moe_loop, "torch bf16": moe_tutel_bf16,
                    "torch2 tutel": moe_tutel,
                    "torch2 compile": moe_tutel}


# ------------------------------------------------------------ child process

def _maxrss_mb():
    """Peak resident set size of this process image, in MiB.

    VmHWM of /proc/self/status: getrusage's ru_maxrss is no good in a child
    of a large parent, since Linux carries the parent's peak over fork and
    exec into it (the baseline would hide everything below the parent's
    RSS). ru_maxrss remains the fallback off Linux.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _time_calls(call, warmup, repeats, check=None):
    """Times `repeats` calls after `warmup` ones; `check()` runs between
    (on the warm-up's output), so a wrong row fails before it is timed."""
    for _ in range(warmup):
        call()
    if check is not None:
        check()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def _compiled_child(job, inputs):
    """Times @moe_layer, then @moe_routing, of the job's shared object."""
    size, B = job["size"], job["B"]
    G, S, D, E, k = (size[n] for n in "GSDEk")
    library = ctypes.CDLL(job["library"])
    layer = library._mlir_ciface_moe_layer
    routing = library._mlir_ciface_moe_routing
    layer.restype = routing.restype = None
    out = np.full((G, S, D), np.nan, dtype=np.float32)
    slots = np.full((G, S, k), -7, dtype=np.int32)
    fill = np.full((E, G), -7, dtype=np.int32)
    if job["impl"] in PACKED:  # once, as the model runtime does at load
        inputs = dict(inputs, w1=pack_panels(inputs["w1"]),
                      w2=pack_panels(inputs["w2"]))
    if job["impl"] in BF16_PACKED:
        inputs = dict(inputs, w1=pack_bf16_pairs(inputs["w1"]),
                      w2=pack_bf16_pairs(inputs["w2"]))
    descriptors = [as_memref(inputs[n]) for n in INPUT_NAMES]
    layer_args = [ctypes.byref(d) for d in descriptors + [as_memref(out)]]
    routing_args = [ctypes.byref(d) for d in
                    descriptors[:2] + [as_memref(slots), as_memref(fill)]]
    baseline = _maxrss_mb()
    times = _time_calls(lambda: layer(*layer_args), job["warmup"],
                        job["repeats"], lambda: _check_output(job, out))
    peak = _maxrss_mb() - baseline
    routing_times = _time_calls(lambda: routing(*routing_args),
                                job["warmup"], job["repeats"])
    np.save(os.path.join(job["out_dir"], "slots.npy"), slots)
    np.save(os.path.join(job["out_dir"], "fill.npy"), fill)
    return out, times, peak, {"routing_ms": _median_ms(routing_times)}


def _torch_child(job, inputs):
    """Times one torch style, or the sgemm roofline."""
    import torch
    torch.set_num_threads(job["threads"])
    size, B = job["size"], job["B"]
    G, S, D, H, E, k = (size[n] for n in "GSDHEk")
    t = {n: torch.from_numpy(a) for n, a in inputs.items()}
    if job["impl"] == ROOFLINE:
        rows = E * G * B
        a = t["x"].reshape(G * S, D)[torch.arange(rows) % (G * S)]
        w1, w2 = t["w1"][0], t["w2"][0]
        h, y = torch.zeros(rows, H), torch.zeros(rows, D)  # touched now

        def call():
            torch.matmul(a, w1, out=h)
            torch.matmul(h, w2, out=y)
            return None
    else:
        function = _TORCH_FUNCTIONS[job["impl"]]
        if job["impl"] in PEER_STYLES:
            print(f"{job['impl']}: torch {torch.__version__}",
                  file=sys.stderr)
        if job["impl"] == "torch2 compile":
            function = torch.compile(function)
        if job["impl"] in TORCH_BF16_STYLES:  # once, before timing
            t = dict(t, w1=t["w1"].to(torch.bfloat16),
                     w2=t["w2"].to(torch.bfloat16))
        args = [t[n] for n in INPUT_NAMES] + [k, B]

        def call():
            return function(*args)
    result = {}
    with torch.inference_mode():
        baseline = _maxrss_mb()
        times = _time_calls(
            lambda: result.update(out=call()), job["warmup"], job["repeats"],
            lambda: result["out"] is None or _check_output(
                job, result["out"].numpy()))
        peak = _maxrss_mb() - baseline
    out = None if result["out"] is None else result["out"].numpy()
    return out, times, peak, {}


def _jax_child(job, inputs):
    """Times the JAX layer (bench/jax_moe.py) under XLA:CPU. XLA sizes its
    thread pool by the CPUs this process may run on, so the affinity mask
    sets the thread count."""
    cpus = sorted(os.sched_getaffinity(0))[:job["threads"]]
    os.sched_setaffinity(0, cpus)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import jax
    import jax_moe
    print(f"{job['impl']}: jax {jax.__version__}", file=sys.stderr)
    call = jax_moe.run_layer(inputs, job["size"]["k"], job["B"])
    result = {}
    baseline = _maxrss_mb()
    times = _time_calls(lambda: result.update(out=call()), job["warmup"],
                        job["repeats"],
                        lambda: _check_output(job, result["out"]))
    peak = _maxrss_mb() - baseline
    return result["out"], times, peak, {}


def _check_output(job, out):
    """Raises (the child fails) when `out` differs from the compiled
    layer's output (job["reference"], written by the `vmoe fused` row) by
    `job["tolerance"]` or more, before the row is timed."""
    if not job.get("reference"):
        return True
    error = relative_error(out, np.load(job["reference"]))
    if not error <= job["tolerance"]:
        raise SystemExit(f"{job['impl']}: output differs from vmoe fused "
                         f"before timing: max rel err {error:.2e} > "
                         f"{job['tolerance']}")
    return True


def _median_ms(times):
    return statistics.median(times) * 1e3


def child_main(job_path):
    """Entry of a timing child: runs the job and writes result.json."""
    with open(job_path) as f:
        job = json.load(f)
    inputs = load_inputs(job["data_dir"])
    compiled = (*PIPELINES, BASELINE)
    run = (_compiled_child if job["impl"] in compiled else
           _jax_child if job["impl"] == JAX_STYLE else _torch_child)
    out, times, peak, extra = run(job, inputs)
    if out is not None:
        np.save(os.path.join(job["out_dir"], "out.npy"), out)
    result = dict(extra, median_ms=_median_ms(times), min_ms=min(times) * 1e3,
                  max_ms=max(times) * 1e3, times_ms=[s * 1e3 for s in times],
                  peak_extra_rss_mb=peak)
    with open(os.path.join(job["out_dir"], "result.json"), "w") as f:
        json.dump(result, f)


def child_environment(impl, threads):
    """The environment of a timing child: thread counts, and for torch a
    passive OpenMP wait policy unless the caller set one.

    Debian's torch runs its elementwise ops on libgomp threads and its
    GEMMs on OpenBLAS's own pthreads. With libgomp's default spin-waiting
    the idle OpenMP threads keep the cores busy while OpenBLAS works, and
    at 2 threads on 2 cores torch ran 3-10x slower than at 1 thread;
    OMP_WAIT_POLICY=PASSIVE removes that. The compiled code (libomp only)
    showed no such effect and keeps the runtime's default.
    """
    n = str(threads)
    env = dict(os.environ, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n,
               MKL_NUM_THREADS=n)
    if impl not in (*PIPELINES, BASELINE):
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def run_child(job, job_dir):
    """Runs one timing configuration in a fresh process; returns its result."""
    os.makedirs(job_dir, exist_ok=True)
    job = dict(job, out_dir=job_dir)
    job_path = os.path.join(job_dir, "job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    env = child_environment(job["impl"], job["threads"])
    try:
        python = job.get("python") or sys.executable
        done = subprocess.run(
            [python, os.path.abspath(__file__), "--child", job_path],
            capture_output=True, text=True, env=env,
            timeout=_CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{job['impl']} ({job['threads']} threads) timed out")
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [
            f"exit status {done.returncode}"]
        with open(os.path.join(job_dir, "error.log"), "w") as f:
            f.write(done.stderr)
        raise BenchError(f"{job['impl']} ({job['threads']} threads) failed "
                         f"(exit {done.returncode}): {lines[-1]}")
    with open(os.path.join(job_dir, "result.json")) as f:
        return json.load(f)


# ----------------------------------------------------------------- checking

def relative_error(got, ref):
    """max |got - ref| / (|ref| + floor * max|ref|), computed in float64."""
    got, ref = got.astype(np.float64), ref.astype(np.float64)
    scale = np.abs(ref) + _ERROR_FLOOR * np.abs(ref).max()
    return float(np.max(np.abs(got - ref) / scale))


def check_routing(inputs, B, size, job_dir):
    """Compiled slots and fill vs torch_routing; returns drop statistics."""
    import torch
    ids, _, slots = torch_routing(torch.from_numpy(inputs["x"]),
                                  torch.from_numpy(inputs["router"]),
                                  size["k"], B)
    ids, slots = ids.numpy(), slots.numpy()
    got_slots = np.load(os.path.join(job_dir, "slots.npy"))
    if not np.array_equal(got_slots, slots):
        wrong = np.argwhere(got_slots != slots)
        index = tuple(int(i) for i in wrong[0])
        raise BenchError(f"compiled and torch routing differ: slots{index} "
                         f"= {got_slots[index]} vs {slots[index]} "
                         f"({len(wrong)} mismatches)", status=1)
    E, G = size["E"], size["G"]
    kept = slots >= 0
    fill = np.zeros((E, G), dtype=np.int64)
    for g in range(G):
        fill[:, g] = np.bincount(ids[g][kept[g]], minlength=E)
    got_fill = np.load(os.path.join(job_dir, "fill.npy"))
    if not np.array_equal(got_fill, fill):
        raise BenchError("compiled and torch per-expert fill differ",
                         status=1)
    return {"dropped_choices": int((~kept).sum()), "choices": int(kept.size),
            "filled_slots": int(kept.sum()), "slots": int(E * G * B)}


# ---------------------------------------------------------------- reporting

def expert_gflop(size, B):
    """Expert FLOPs at capacity: 4 * E * G * B * D * H (two GEMMs)."""
    return 4.0 * size["E"] * size["G"] * B * size["D"] * size["H"] / 1e9


def summarize(results, gflop):
    """Adds GFLOP/s and the ratios to every result; returns the summary."""
    roof = results[ROOFLINE]["median_ms"]
    styles = [s for s in (*TORCH_STYLES, *PEER_STYLES) if s in results]
    fastest = min(styles, key=lambda s: results[s]["median_ms"])
    best_torch = results[fastest]["median_ms"]
    for result in results.values():
        ms = result["median_ms"]
        result["gflops"] = gflop / (ms / 1e3)
        result["vs_roofline"] = ms / roof
        result["vs_fastest_torch"] = ms / best_torch
    fused = results["vmoe fused"]["median_ms"]
    bf16_rows = [s for s in TORCH_BF16_STYLES if s in results]
    spread = max((r["max_ms"] - r["min_ms"]) / r["median_ms"]
                 for r in results.values())
    summary = {"fastest_torch": fastest, "fused_over_roofline": fused / roof,
               "fastest_torch_over_fused": best_torch / fused,
               "repack_over_fused": results["vmoe repack"]["median_ms"] / fused,
               "static_over_fused": results["vmoe static"]["median_ms"] / fused,
               "no_prefetch_over_fused":
                   results["vmoe no prefetch"]["median_ms"] / fused,
               "max_spread": spread}
    if BASELINE in results:
        summary["before_over_fused"] = results[BASELINE]["median_ms"] / fused
    if "vmoe bf16" in results:
        bf16 = results["vmoe bf16"]["median_ms"]
        summary["fused_over_bf16"] = fused / bf16
        if bf16_rows:
            best_bf16 = min(results[s]["median_ms"] for s in bf16_rows)
            summary["fastest_torch_bf16_over_bf16"] = best_bf16 / bf16
    return summary


def print_table(name, size, B, threads, results, summary, routing, errors,
                load):
    print(f"\n== {name} ({threads} thread{'s' if threads > 1 else ''}, "
          f"load average {load:.1f} before): "
          f"G={size['G']} S={size['S']} D={size['D']} H={size['H']} "
          f"E={size['E']} k={size['k']} C={size['C']} B={B}; "
          f"dropped {routing['dropped_choices']}/{routing['choices']} "
          f"choices, {routing['filled_slots']}/{routing['slots']} slots "
          f"filled; compiled routing == torch routing")
    header = (f"{'implementation':<16}{'median ms':>10}{'min ms':>9}"
              f"{'GFLOP/s':>9}"
              f"{'/roofline':>10}{'/torch':>8}{'RSS MB':>8}{'spread':>8}"
              f"{'max rel err':>13}")
    print(header)
    print("-" * len(header))
    for impl in results:
        r = results[impl]
        spread = (r["max_ms"] - r["min_ms"]) / r["median_ms"] * 100
        err = errors.get(impl)
        err_text = "" if err is None else f"{err:.1e}"
        print(f"{impl:<16}{r['median_ms']:>10.2f}{r['min_ms']:>9.2f}"
              f"{r['gflops']:>9.1f}"
              f"{r['vs_roofline']:>10.2f}{r['vs_fastest_torch']:>8.2f}"
              f"{r['peak_extra_rss_mb']:>8.1f}{spread:>7.0f}%"
              f"{err_text:>13}")
    for impl in (*PIPELINES, BASELINE):
        if impl not in results:
            continue
        r = results[impl]
        share = r["routing_ms"] / r["median_ms"] * 100
        print(f"  {impl}: routing (route + bpr_sort + assign_slots) "
              f"{r['routing_ms']:.2f} ms = {share:.1f}% of the layer")
    print(f"fused/roofline = {summary['fused_over_roofline']:.2f}, "
          f"fastest-torch/fused = {summary['fastest_torch_over_fused']:.2f} "
          f"(fastest torch: {summary['fastest_torch']}), "
          f"repack/fused = {summary['repack_over_fused']:.2f}, "
          f"static/fused = {summary['static_over_fused']:.2f}, "
          f"no-prefetch/fused = {summary['no_prefetch_over_fused']:.2f}" + (
              f", before/fused = {summary['before_over_fused']:.2f}"
              if "before_over_fused" in summary else "") + (
              f", fused/bf16 = {summary['fused_over_bf16']:.2f}"
              if "fused_over_bf16" in summary else "") + (
              ", torch-bf16/vmoe-bf16 = "
              f"{summary['fastest_torch_bf16_over_bf16']:.2f}"
              if "fastest_torch_bf16_over_bf16" in summary else ""))
    if summary["max_spread"] > _NOISY_SPREAD:
        print(f"note: spread up to {summary['max_spread']:.0%} -- other "
              f"processes disturbed the timings; the ratios are indicative")


def machine_info(threads):
    import torch
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu_model": model, "logical_cpus": os.cpu_count(),
            "torch_version": torch.__version__,
            "numpy_version": np.__version__,
            "python": platform.python_version(), "threads": threads,
            "load_average_at_start": list(os.getloadavg())}


def snapshot_vmoe_opt(path, workdir, name="vmoe-opt"):
    """A copy of vmoe-opt in the work directory, so that a rebuild during
    the run (others build in the same tree) cannot mix two compilers."""
    copy = os.path.join(workdir, name)
    try:
        shutil.copy2(path, copy)
    except OSError as error:
        raise BenchError(f"vmoe-opt: cannot copy {path}: {error}")
    return copy


def compiler_info(args):
    """Which vmoe-opt ran (it may be rebuilt between runs) and the commit."""
    try:
        head = subprocess.run(["git", "-C", _REPO, "rev-parse", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        head = ""
    try:
        built = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(
            os.path.getmtime(args.vmoe_opt)))
    except OSError:
        built = None
    return {"vmoe_opt": args.vmoe_opt, "vmoe_opt_modified": built,
            "git_head": head or None, "clang": args.clang}


# --------------------------------------------------------------------- main

def _parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vmoe-opt",
                        default=os.path.join(_REPO, "build/bin/vmoe-opt"))
    parser.add_argument("--mlir-translate",
                        default="/usr/lib/llvm-22/bin/mlir-translate")
    parser.add_argument("--clang", default="clang-22")
    parser.add_argument("--repeats", type=int, default=7,
                        help="timed calls per configuration (default 7)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed calls first (default 1)")
    parser.add_argument("--threads", default="1,2",
                        help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--sizes", default=",".join(SIZES),
                        help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--json", default=os.path.join(_BENCH_DIR,
                                                       "results.json"),
                        help="results file (default bench/results.json)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 3 repeats, s32-g1, 1 thread")
    parser.add_argument("--workdir",
                        help="keep inputs, MLIR, libraries and outputs here "
                             "(default: a temporary directory, removed)")
    parser.add_argument("--baseline-vmoe-opt",
                        help="another vmoe-opt (e.g. built from an older "
                             "commit): adds the row `vmoe before`, the plain "
                             "layer compiled by it with the fused pipeline, "
                             "for a before/after comparison in one run")
    parser.add_argument("--peer-python",
                        default=os.environ.get("VMOE_PEER_PYTHON"),
                        help="a Python with PyTorch 2.x (scripts/"
                             "bench_peers.sh) for the torch2 rows: tutel "
                             "style eager and under torch.compile, and the "
                             "jax xla row where it has jax "
                             "(default: $VMOE_PEER_PYTHON; none: no rows)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.sizes, args.threads = 3, "s32-g1", "1"
    try:
        args.thread_counts = [int(n) for n in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads: expected integers, got {args.threads!r}")
    args.size_names = args.sizes.split(",")
    unknown = [s for s in args.size_names if s not in SIZES]
    if unknown:
        parser.error(f"--sizes: unknown {unknown}; known: {list(SIZES)}")
    if args.repeats < 1 or args.warmup < 1 or min(args.thread_counts) < 1:
        parser.error("--repeats, --warmup and --threads must be >= 1")
    return args


def bench_size(name, args, workdir):
    """Prepares, compiles, times and checks one size; returns its record."""
    size = SIZES[name]
    B = capacity(size)
    size_dir = os.path.join(workdir, name)
    data_dir = os.path.join(size_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    inputs = draw_inputs(name, size)
    for n, array in inputs.items():
        np.save(os.path.join(data_dir, n + ".npy"), array)
    mlir_paths = {}
    for layout in ("plain", "packed", "bf16"):
        mlir_paths[layout] = os.path.join(size_dir, f"layer-{layout}.mlir")
        with open(mlir_paths[layout], "w") as f:
            f.write(emit_mlir(size, B, layout != "plain", layout == "bf16"))

    def layout_of(impl):
        return ("packed" if impl in PACKED else
                "bf16" if impl in BF16_PACKED else "plain")
    libraries, compile_s = {}, {}
    for impl, pipeline in PIPELINES.items():
        out_dir = os.path.join(size_dir, impl.replace(" ", "_"))
        os.makedirs(out_dir, exist_ok=True)
        libraries[impl], compile_s[impl] = compile_module(
            mlir_paths[layout_of(impl)], pipeline, out_dir, args)
    if args.baseline_vmoe_opt:
        out_dir = os.path.join(size_dir, "vmoe_before")
        os.makedirs(out_dir, exist_ok=True)
        libraries[BASELINE], compile_s[BASELINE] = compile_module(
            mlir_paths["plain"], PIPELINES["vmoe repack"], out_dir, args,
            vmoe_opt=args.baseline_vmoe_opt)
    print(f"{name}: compiled (" + ", ".join(
        f"{impl} {s:.1f} s" for impl, s in compile_s.items()) +
        f"; {VECTOR_WIDTH}-lane vectors)", flush=True)

    record = {"size": size, "B": B, "expert_gflop": expert_gflop(size, B),
              "compile_seconds": compile_s, "configurations": {}}
    outputs = []  # (label, output) for the determinism check
    for threads in args.thread_counts:
        results, errors, dirs = {}, {}, {}
        load = os.getloadavg()[0]
        reference = os.path.join(size_dir, f"t{threads}", "vmoe_fused",
                                 "out.npy")
        for impl in implementations(args):
            job_dir = os.path.join(size_dir, f"t{threads}",
                                   impl.replace(" ", "_"))
            job = {"impl": impl, "size": size, "B": B, "threads": threads,
                   "data_dir": data_dir, "warmup": args.warmup,
                   "repeats": args.repeats,
                   "library": libraries.get(impl),
                   "python": args.peer_python
                   if impl in (*PEER_STYLES, JAX_STYLE) else None,
                   "reference": None if impl in ("vmoe fused", ROOFLINE)
                   else reference,
                   "tolerance": row_tolerance(impl)}
            results[impl] = run_child(job, job_dir)
            dirs[impl] = job_dir
            print(f"  {name} t{threads} {impl}: "
                  f"{results[impl]['median_ms']:.2f} ms", flush=True)
        routing = check_routing(inputs, B, size, dirs["vmoe fused"])
        fused = np.load(os.path.join(dirs["vmoe fused"], "out.npy"))
        for impl in implementations(args):
            if impl == ROOFLINE:
                continue
            got = np.load(os.path.join(dirs[impl], "out.npy"))
            errors[impl] = relative_error(got, fused)
            results[impl]["max_rel_err_vs_fused"] = errors[impl]
        outputs.append((f"{threads} threads", fused))
        summary = summarize(results, record["expert_gflop"])
        print_table(name, size, B, threads, results, summary, routing, errors,
                    load)
        record["configurations"][f"threads={threads}"] = {
            "threads": threads, "load_average_before": load,
            "routing": routing, "results": results,
            "summary": summary}
        _check_errors(name, threads, errors)
    for label, out in outputs[1:]:
        if not np.array_equal(out, outputs[0][1]):
            raise BenchError(f"{name}: fused output at {label} differs from "
                             f"{outputs[0][0]} (not deterministic)", 1)
    return record


BASELINE = "vmoe before"


@functools.lru_cache(maxsize=None)
def _python_has(python, module):
    """Whether `python` can import `module`."""
    try:
        return subprocess.run([python, "-c", "import " + module],
                              capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def implementations(args):
    """The rows of a table: the compiled layer first (the others check
    their output against it before they are timed)."""
    peers = PEER_STYLES if args.peer_python else ()
    if args.peer_python and _python_has(args.peer_python, "jax"):
        peers = (*peers, JAX_STYLE)
    before = (BASELINE,) if args.baseline_vmoe_opt else ()
    return (*PIPELINES, *before, *TORCH_STYLES, *TORCH_BF16_STYLES, *peers,
            ROOFLINE)


def row_tolerance(impl):
    """Largest relative error vs `vmoe fused` a row may have."""
    if impl in EXACT:
        return 0.0  # same arithmetic (weight layout, schedule, prefetches)
    if impl in (*BF16_PACKED, *TORCH_BF16_STYLES):
        return BF16_VS_FUSED_RTOL
    if impl in (*PIPELINES, BASELINE):
        return FUSED_VS_UNFUSED_RTOL
    return TORCH_VS_FUSED_RTOL


def _check_errors(name, threads, errors):
    unfused = errors["vmoe unfused"]
    if not unfused < FUSED_VS_UNFUSED_RTOL:
        raise BenchError(f"{name} t{threads}: fused vs unfused max rel err "
                         f"{unfused:.2e} >= {FUSED_VS_UNFUSED_RTOL}", 1)
    for row in EXACT:  # same arithmetic, other layout or schedule
        if errors[row] != 0:
            raise BenchError(f"{name} t{threads}: {row} and vmoe fused "
                             f"give different outputs (max rel err "
                             f"{errors[row]:.2e})", 1)
    for row in (*BF16_PACKED, *TORCH_BF16_STYLES):
        if not errors[row] < BF16_VS_FUSED_RTOL:
            raise BenchError(f"{name} t{threads}: {row} vs fused max rel "
                             f"err {errors[row]:.2e} >= "
                             f"{BF16_VS_FUSED_RTOL}", 1)
    for style in TORCH_STYLES:
        if not errors[style] < TORCH_VS_FUSED_RTOL:
            raise BenchError(f"{name} t{threads}: {style} vs fused max rel "
                             f"err {errors[style]:.2e} >= "
                             f"{TORCH_VS_FUSED_RTOL}", 1)


def main(argv=None):
    args = _parse_args(argv)
    if args.child:
        child_main(args.child)
        return 0
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
    workdir = args.workdir or tempfile.mkdtemp(prefix="vmoe-moe-bench-")
    report = {"machine": machine_info(args.thread_counts),
              "command": sys.argv, "repeats": args.repeats,
              "warmup": args.warmup, "pipelines": PIPELINES,
              "packed_weights": list(PACKED),
              "bf16_pair_weights": list(BF16_PACKED), "bf16_dot": BF16_DOT,
              "vector_width": VECTOR_WIDTH,
              "error_measure": "max |a-b| / (|b| + 0.1 max|b|) vs vmoe fused",
              "omp_wait_policy": {
                  "compiled": os.environ.get("OMP_WAIT_POLICY", "default"),
                  "torch": child_environment(TORCH_STYLES[0], 1)[
                      "OMP_WAIT_POLICY"]},
              "compiler": compiler_info(args), "sizes": {}}
    status = 0
    try:
        args.vmoe_opt = snapshot_vmoe_opt(args.vmoe_opt, workdir)
        if args.baseline_vmoe_opt:
            args.baseline_vmoe_opt = snapshot_vmoe_opt(
                args.baseline_vmoe_opt, workdir, "vmoe-opt-before")
        for name in args.size_names:
            report["sizes"][name] = bench_size(name, args, workdir)
    except BenchError as error:
        if not args.workdir:  # keep the logs, drop the large inputs
            for name in os.listdir(workdir):
                shutil.rmtree(os.path.join(workdir, name, "data"),
                              ignore_errors=True)
        print(f"moe_layer_bench: error: {error} [work files: {workdir}]",
              file=sys.stderr)
        report["error"] = str(error)
        status = error.status
    else:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)),
                    exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        if status == 0:
            print(f"\nresults written to {args.json}")
    return status


if __name__ == "__main__":
    sys.exit(main())
