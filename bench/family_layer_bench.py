"""Benchmark of expert choice, Soft MoE and decoder MoE layers: compiled vs
PyTorch.

    /usr/bin/python3 bench/family_layer_bench.py [--vmoe-opt build/bin/vmoe-opt]
        [--repeats N] [--rounds R] [--threads 1,2]
        [--sizes ec-s32,ec-b,soft-s32,soft-s16]
        [--json bench/results-families.json] [--quick] [--workdir DIR]
        [--baseline-vmoe-opt OLD/build/bin/vmoe-opt]

The layers (SPEC section 8), each written as the vmoe ops the model front
end emits:

  expert choice  vmoe.expert_choice (softmax gates, each expert's top-B
                 tokens, B = round(S*C/E)) + vmoe.expert_choice_experts
                 (gelu_tanh expert MLPs on the taken rows, gate-weighted sum)
  Soft MoE       vmoe.soft_moe (normalized logits against phi, dispatch
                 softmax over tokens, expert MLPs on E*P slots per group,
                 combine softmax over slots)
  decoder        vmoe.route (Mixtral: top-2 KeepTopK renormalized; Switch:
                 k = 1) + vmoe.dispatch (C = 1.25, or dropless C = E/k) +
                 vmoe.expert_swiglu + vmoe.combine

For every size and thread count it times, each in a fresh child process
(the machinery of moe_layer_bench.py: median of --repeats calls after a
warm-up, peak extra RSS, thread counts through OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS and torch.set_num_threads, torch children with
OMP_WAIT_POLICY=PASSIVE):

  vmoe            `vmoe-lower-to-cpu{parallel=true vector-width=W}`, W
                  as vmoe-compile picks it: 16 on AVX-512 machines, else 8
                  (--vector-width to force one), plain expert weights: the
                  expert GEMMs repack them into panels on every call
  vmoe packed     (expert choice, Soft MoE) the same layer with w1 and w2
                  packed once into the GEMM panel layout (numpy, in the
                  child before timing, as the model runtime does at load)
                  and passed through vmoe.unpack_panels, which
                  vmoe-fuse-experts folds into the op (weight_panels): the
                  expert GEMMs read them in place, as in a compiled model
  vmoe before     with --baseline-vmoe-opt PATH: the plain layer compiled
                  by another vmoe-opt (an older build), to compare
                  compilers in one run
  torch ...       PyTorch 1.13 eager implementations of the same layer, in
                  the styles listed in TORCH_STYLES (the fastest one is the
                  reference of the ratios)
  sgemm roofline  torch.matmul (OpenBLAS) of the expert FLOPs as one GEMM
                  pair

With --rounds R, every implementation of a size and thread count is timed
R times, round-robin (so that a burst of load from other processes hits
them alike); the table shows the median over the rounds of each round's
median, and the ratio is the median over the rounds of that round's
fastest-torch / vmoe ratio (with its smallest and largest value).

Checks (exit status 1): every torch style agrees with the compiled output
to max |a - b| / (|b| + 0.1 max|b|) < 1e-4, `vmoe packed` (and `vmoe
before`) give the same output as `vmoe` bit for bit (same arithmetic, other
weight layout or scratch), and the compiled output is the same bit for bit
at every thread count. Tool failures exit with 2.
"""

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _BENCH_DIR)

import moe_layer_bench as base  # noqa: E402
from moe_layer_bench import BenchError  # noqa: E402
from vmoe_tools.memref import as_memref  # noqa: E402

SIZES = {
    # V-MoE-S/32 shapes (8 images x 50 tokens per group); C = 2 gives the
    # expert compute of top-2 token choice at C = 1 (E*B = 2*S rows).
    "ec-s32": dict(family="expert_choice", G=1, S=400, D=512, H=2048, E=32,
                   C=2.0),
    "ec-b": dict(family="expert_choice", G=1, S=400, D=768, H=3072, E=8,
                 C=2.0),
    # Soft MoE groups are single images: 8 S/32 images, 4 S/16 images.
    "soft-s32": dict(family="soft", G=8, S=50, D=512, H=2048, E=32, P=2),
    "soft-s16": dict(family="soft", G=4, S=197, D=384, H=1536, E=64, P=2),
    # Decoder-style blocks (vmoe.route + dispatch + expert_swiglu + combine):
    # Mixtral routing (top-2 of 8, KeepTopK renormalized) at C = 1.25 and
    # dropless (C = E/k, B = S), Switch (k = 1, C = 1.25).
    "mixtral-c1.25": dict(family="decoder", G=1, S=512, D=512, H=1024, E=8,
                          k=2, C=1.25, order="topk_softmax"),
    "mixtral-dropless": dict(family="decoder", G=1, S=512, D=512, H=1024,
                             E=8, k=2, C=4.0, order="topk_softmax"),
    "switch-c1.25": dict(family="decoder", G=1, S=512, D=512, H=1024, E=8,
                         k=1, C=1.25, order="softmax_topk"),
}

def default_vector_width():
    """16 f32 lanes with AVX-512 (as vmoe-compile picks), else 8."""
    try:
        with open("/proc/cpuinfo") as f:
            return 16 if " avx512f" in f.read() else 8
    except OSError:
        return 8


def pipeline(vector_width):
    return f"vmoe-lower-to-cpu{{parallel=true vector-width={vector_width}}}"

COMPILED = "vmoe"
PACKED = "vmoe packed"
BASELINE = "vmoe before"
COMPILED_IMPLS = (COMPILED, PACKED, BASELINE)
TORCH_STYLES = {"expert_choice": ("torch gather", "torch einsum",
                                  "torch loop"),
                "soft": ("torch einsum", "torch bmm"),
                "decoder": ("torch loop", "torch gather")}
ROOFLINE = "sgemm roofline"
TORCH_VS_COMPILED_RTOL = 1e-4
_SEPARATION = 1e-6
_MAX_DRAWS = 200


def capacity(size):
    """Expert choice B = round(S*C/E); Soft MoE: P; decoder: round(k*S*C/E)."""
    if size["family"] == "soft":
        return size["P"]
    import vmoe_ref.ops as ref
    return ref.sized_capacity(size.get("k", 1), size["S"], size["C"],
                              size["E"])


def rows(size, B):
    """Expert MLP rows per call (decoder: the k*G*S choices at most, the
    rows a dropless layer must compute)."""
    if size["family"] == "decoder":
        return min(size["E"] * size["G"] * B,
                   size["k"] * size["G"] * size["S"])
    return size["E"] * size["G"] * B


def gemms(size):
    """Expert GEMMs per row: 2 (MLP), 3 (SwiGLU)."""
    return 3 if size["family"] == "decoder" else 2


def _expert_choice_is_robust(x, router, B):
    """Whether f32 rounding cannot change which tokens an expert takes: the
    B-th and (B+1)-th gates of every expert column are apart."""
    logits = x.astype(np.float64) @ router.astype(np.float64)
    gates = np.exp(logits - logits.max(-1, keepdims=True))
    gates /= gates.sum(-1, keepdims=True)
    S = gates.shape[1]
    if B >= S:
        return True
    ranked = -np.sort(-gates, axis=1)
    gap = ranked[:, B - 1] - ranked[:, B]
    return bool(np.all(gap > _SEPARATION * ranked[:, B - 1]))


def _decoder_is_robust(x, router, k):
    """Whether f32 rounding cannot change any token's top-k experts: its
    k-th and (k+1)-th logits are apart (and the chosen ones among
    themselves)."""
    logits = x.astype(np.float64) @ router.astype(np.float64)
    ranked = -np.sort(-logits, axis=-1)
    step = ranked[..., :-1] - ranked[..., 1:]
    return bool(np.all(step > _SEPARATION * np.abs(ranked[..., :-1])))


def draw_inputs(name, size, B):
    """Float32 inputs: x ~ N(0, 1), router ~ N(0, 1/D) (redrawn until
    robust), phi ~ N(0, 1/D), scale 1, expert weights ~ N(0, 1/fan_in),
    biases ~ N(0, 0.02^2)."""
    G, S, D, H, E = (size[n] for n in "GSDHE")
    for attempt in range(_MAX_DRAWS):
        rng = np.random.default_rng([G, S, D, E, attempt])
        x = rng.standard_normal((G, S, D), dtype=np.float32)
        if size["family"] == "soft":
            phi = rng.standard_normal((D, E, size["P"]), dtype=np.float32)
            arrays = dict(x=x, phi=phi * np.float32(1 / np.sqrt(D)),
                          scale=np.array(1.0, dtype=np.float32))
            break
        router = rng.standard_normal((D, E), dtype=np.float32)
        router *= np.float32(1 / np.sqrt(D))
        if size["family"] == "decoder":
            if _decoder_is_robust(x, router, size["k"]):
                arrays = dict(x=x, router=router)
                break
            continue
        if _expert_choice_is_robust(x, router, B):
            arrays = dict(x=x, router=router)
            break
    else:
        raise BenchError(f"{name}: no robust routing in {_MAX_DRAWS} draws")
    rng = np.random.default_rng([D, H, E])
    if size["family"] == "decoder":
        for n, shape, fan_in in (("w_gate", (E, D, H), D),
                                 ("w_up", (E, D, H), D),
                                 ("w_down", (E, H, D), H)):
            arrays[n] = rng.standard_normal(shape, dtype=np.float32) * \
                np.float32(1 / np.sqrt(fan_in))
        return arrays
    arrays["w1"] = rng.standard_normal((E, D, H), dtype=np.float32) * \
        np.float32(1 / np.sqrt(D))
    arrays["w2"] = rng.standard_normal((E, H, D), dtype=np.float32) * \
        np.float32(1 / np.sqrt(H))
    arrays["b1"] = rng.standard_normal((E, H), dtype=np.float32) * \
        np.float32(0.02)
    arrays["b2"] = rng.standard_normal((E, D), dtype=np.float32) * \
        np.float32(0.02)
    return arrays


def input_names(size):
    if size["family"] == "decoder":
        return ("x", "router", "w_gate", "w_up", "w_down")
    if size["family"] == "soft":
        return ("x", "phi", "scale", "w1", "b1", "w2", "b2")
    return ("x", "router", "w1", "b1", "w2", "b2")


def emit_mlir(size, B, packed=False):
    """`@moe_layer`: the layer, out in destination-passing style. With
    `packed`, w1 and w2 arrive in the panel layout of base.pack_panels,
    through vmoe.unpack_panels (as the model front end emits them)."""
    G, S, D, H, E = (size[n] for n in "GSDHE")
    L = base.PANEL_WIDTH
    t_x, m_x = f"tensor<{G}x{S}x{D}xf32>", f"memref<{G}x{S}x{D}xf32>"
    weights = (f"tensor<{E}x{D}x{H}xf32>, tensor<{E}x{H}xf32>, "
               f"tensor<{E}x{H}x{D}xf32>, tensor<{E}x{D}xf32>")
    w = weights.split(", ")
    expert_args = (f"%w1: {w[0]}, %b1: {w[1]}, %w2: {w[2]}, %b2: {w[3]}")
    unpack = ""
    if packed:
        p1 = f"tensor<{E}x{H // L}x{D}x{L}xf32>"
        p2 = f"tensor<{E}x{D // L}x{H}x{L}xf32>"
        expert_args = (f"%w1p: {p1}, %b1: {w[1]}, %w2p: {p2}, "
                       f"%b2: {w[3]}")
        unpack = f"""\
  %w1 = vmoe.unpack_panels %w1p : {p1} -> {w[0]}
  %w2 = vmoe.unpack_panels %w2p : {p2} -> {w[2]}
"""
    if size["family"] == "decoder":
        return _emit_decoder_mlir(size, B)
    if size["family"] == "soft":
        t_phi = f"tensor<{D}x{E}x{size['P']}xf32>"
        args = f"%x: {t_x}, %phi: {t_phi}, %scale: tensor<f32>"
        body = f"""\
  %out = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : {t_x}, {t_phi}, tensor<f32>, {weights}"""
    else:
        t_r, t_g = f"tensor<{D}x{E}xf32>", f"tensor<{G}x{S}x{E}xf32>"
        t_t, t_s = f"tensor<{E}x{G}x{B}xi32>", f"tensor<{G}x{S}x{E}xi32>"
        args = f"%x: {t_x}, %router: {t_r}"
        body = f"""\
  %gates, %tokens, %slots = vmoe.expert_choice %x, %router
      : {t_x}, {t_r} -> {t_g}, {t_t}, {t_s}
  %out = vmoe.expert_choice_experts %x, %gates, %tokens, %slots,
                                    %w1, %b1, %w2, %b2
      : {t_x}, {t_g}, {t_t}, {t_s}, {weights}"""
    return f"""\
// vmoe family_layer_bench: {size}
func.func @moe_layer({args}, {expert_args},
    %out_dest: {m_x}) attributes {{llvm.emit_c_interface}} {{
{unpack}{body}
  bufferization.materialize_in_destination %out in restrict writable
      %out_dest : ({t_x}, {m_x}) -> ()
  return
}}
"""


def _emit_decoder_mlir(size, B):
    """route (Mixtral: topk_softmax + normalize) -> dispatch -> expert_swiglu
    -> combine, out in destination-passing style."""
    G, S, D, H, E, k = (size[n] for n in "GSDHEk")
    t_x, m_x = f"tensor<{G}x{S}x{D}xf32>", f"memref<{G}x{S}x{D}xf32>"
    t_r, t_g = f"tensor<{D}x{E}xf32>", f"tensor<{G}x{S}x{E}xf32>"
    t_i, t_w = f"tensor<{G}x{S}x{k}xi32>", f"tensor<{G}x{S}x{k}xf32>"
    t_b = f"tensor<{E}x{G}x{B}x{D}xf32>"
    t_u, t_d = f"tensor<{E}x{D}x{H}xf32>", f"tensor<{E}x{H}x{D}xf32>"
    attrs = f"k = {k} : i64"
    if size["order"] == "topk_softmax":
        attrs += ", order = #vmoe.route_order<topk_softmax>, normalize = true"
    return f"""\
// vmoe family_layer_bench: {size}
func.func @moe_layer(%x: {t_x}, %router: {t_r}, %w_gate: {t_u},
    %w_up: {t_u}, %w_down: {t_d},
    %out_dest: {m_x}) attributes {{llvm.emit_c_interface}} {{
  %gates, %ids, %weights = vmoe.route %x, %router {{{attrs}}}
      : {t_x}, {t_r} -> {t_g}, {t_i}, {t_w}
  %buffers, %slots = vmoe.dispatch %x, %ids {{capacity_ratio = {float(size['C'])!r} : f64}}
      : {t_x}, {t_i} -> {t_b}, {t_i}
  %y = vmoe.expert_swiglu %buffers, %w_gate, %w_up, %w_down
      : {t_b}, {t_u}, {t_u}, {t_d}
  %out = vmoe.combine %y, %ids, %slots, %weights
      : {t_b}, {t_i}, {t_i}, {t_w} -> {t_x}
  bufferization.materialize_in_destination %out in restrict writable
      %out_dest : ({t_x}, {m_x}) -> ()
  return
}}
"""


# ------------------------------------------------- PyTorch implementations

def _dec_route(x, router, k, order, B):
    """Decoder routing as vmoe.route + vanilla vmoe.dispatch: ids, weights
    [G,S,k] and each choice's slot (its rank among the choices of its
    expert, choice-major then token order); keep = slot < B."""
    import torch
    import torch.nn.functional as F
    G, S, _ = x.shape
    E = router.shape[1]
    logits = torch.matmul(x, router)
    if order == "topk_softmax":
        top = torch.topk(logits, k, dim=-1)
        ids, weights = top.indices, torch.softmax(top.values, dim=-1)
    else:
        top = torch.topk(torch.softmax(logits, dim=-1), k, dim=-1)
        ids, weights = top.indices, top.values
    onehot = F.one_hot(ids, E).transpose(1, 2).reshape(G, k * S, E)
    rank = (torch.cumsum(onehot, dim=1) - 1) * onehot
    slots = rank.sum(-1).view(G, k, S).transpose(1, 2)     # [G, S, k]
    return ids, weights, slots, slots < B


def dec_loop(x, router, w_gate, w_up, w_down, k, order, B):
    """The Hugging Face Mixtral style: per expert, index_select its kept
    (token, choice) rows, SwiGLU with three mm, weighted index_add_."""
    import torch
    import torch.nn.functional as F
    G, S, D = x.shape
    E = router.shape[1]
    ids, weights, _, keep = _dec_route(x, router, k, order, B)
    flat_x = x.reshape(G * S, D)
    flat_ids = torch.where(keep, ids, torch.full_like(ids, -1)).view(G * S, k)
    flat_w = weights.reshape(G * S, k)
    out = x.new_zeros(G * S, D)
    for e in range(E):
        token, choice = torch.nonzero(flat_ids == e, as_tuple=True)
        if token.numel() == 0:
            continue
        rows = flat_x.index_select(0, token)
        h = F.silu(torch.mm(rows, w_gate[e])) * torch.mm(rows, w_up[e])
        y = torch.mm(h, w_down[e]) * flat_w[token, choice].unsqueeze(1)
        out.index_add_(0, token, y)
    return out.view(G, S, D)


def dec_gather(x, router, w_gate, w_up, w_down, k, order, B):
    """Tutel-like: kept rows scattered into [E, G*B, D] buffers, three bmm,
    rows gathered back and weighted."""
    import torch
    import torch.nn.functional as F
    G, S, D = x.shape
    E = router.shape[1]
    ids, weights, slots, keep = _dec_route(x, router, k, order, B)
    groups = torch.arange(G).view(G, 1, 1).expand(G, S, k)
    tokens = torch.arange(S).view(1, S, 1).expand(G, S, k)
    e, g, s, t = ids[keep], groups[keep], slots[keep], tokens[keep]
    buffers = x.new_zeros(E, G * B, D)
    buffers[e, g * B + s] = x[g, t]
    h = F.silu(torch.bmm(buffers, w_gate)) * torch.bmm(buffers, w_up)
    y = torch.bmm(h, w_down)
    out = x.new_zeros(G, S, D)
    out.index_put_((g, t), y[e, g * B + s] * weights[keep].unsqueeze(1),
                   accumulate=True)
    return out

def _ec_route(x, router, B):
    """gates [G,S,E] and each expert's top-B tokens [G,E,B] (topk)."""
    import torch
    gates = torch.softmax(torch.matmul(x, router), dim=-1)
    b = min(B, x.shape[1])
    tokens = torch.topk(gates.transpose(1, 2), b, dim=-1).indices
    return gates, tokens


def ec_gather(x, router, w1, b1, w2, b2, B):
    """Rows gathered into [E, G*b, D], baddbmm + gelu + baddbmm, weighted
    index_add_ back."""
    import torch
    import torch.nn.functional as F
    G, S, D = x.shape
    E = w1.shape[0]
    gates, tokens = _ec_route(x, router, B)
    b = tokens.shape[-1]
    flat = (torch.arange(G).view(G, 1, 1) * S + tokens).transpose(0, 1)
    flat = flat.reshape(E, G * b)                          # [E, G*b]
    rows = x.reshape(G * S, D)[flat]                       # [E, G*b, D]
    h = F.gelu(torch.baddbmm(b1.unsqueeze(1), rows, w1), approximate="tanh")
    y = torch.baddbmm(b2.unsqueeze(1), h, w2)              # [E, G*b, D]
    weight = gates.reshape(G * S, E).t().gather(1, flat)   # [E, G*b]
    out = x.new_zeros(G * S, D)
    out.index_add_(0, flat.reshape(-1),
                   (y * weight.unsqueeze(-1)).reshape(E * G * b, D))
    return out.view(G, S, D)


def ec_einsum(x, router, w1, b1, w2, b2, B):
    """Dense dispatch [G, S, E, b] and combine tensors, einsums."""
    import torch
    import torch.nn.functional as F
    G, S, D = x.shape
    gates, tokens = _ec_route(x, router, B)
    dispatch = F.one_hot(tokens, S).to(x.dtype).permute(0, 3, 1, 2)
    combine = dispatch * gates.unsqueeze(-1)               # [G, S, E, b]
    inputs = torch.einsum("gseb,gsd->egbd", dispatch, x)
    h = torch.einsum("egbd,edh->egbh", inputs, w1) + b1[:, None, None, :]
    h = F.gelu(h, approximate="tanh")
    y = torch.einsum("egbh,ehd->egbd", h, w2) + b2[:, None, None, :]
    return torch.einsum("gseb,egbd->gsd", combine, y)


def ec_loop(x, router, w1, b1, w2, b2, B):
    """Per expert: index_select its tokens, two addmm, weighted
    index_add_."""
    import torch
    import torch.nn.functional as F
    G, S, D = x.shape
    E = w1.shape[0]
    gates, tokens = _ec_route(x, router, B)
    flat_x = x.reshape(G * S, D)
    flat_gates = gates.reshape(G * S, E)
    out = x.new_zeros(G * S, D)
    offsets = torch.arange(G).view(G, 1) * S
    for e in range(E):
        index = (tokens[:, e] + offsets).reshape(-1)
        h = F.gelu(torch.addmm(b1[e], flat_x.index_select(0, index), w1[e]),
                   approximate="tanh")
        y = torch.addmm(b2[e], h, w2[e])
        out.index_add_(0, index, y * flat_gates[index, e].unsqueeze(1))
    return out.view(G, S, D)


def _soft_logits(x, phi, scale):
    import torch
    xn = x * torch.rsqrt(x.square().sum(-1, keepdim=True) + 1e-6)
    pn = phi * torch.rsqrt(phi.square().sum(0, keepdim=True) + 1e-6)
    if xn.numel() < pn.numel():
        xn = xn * scale
    else:
        pn = pn * scale
    return xn, pn


def soft_einsum(x, phi, scale, w1, b1, w2, b2):
    """Google's Soft MoE router and dispatcher, as einsums."""
    import torch
    import torch.nn.functional as F
    G, S, D = x.shape
    _, E, P = phi.shape
    xn, pn = _soft_logits(x, phi, scale)
    logits = torch.einsum("gmd,dnp->gmnp", xn, pn)
    dispatch = torch.softmax(logits, dim=1)
    combine = torch.softmax(logits.reshape(G, S, E * P), -1).view(
        G, S, E, P)
    inputs = torch.einsum("gmnp,gmd->ngpd", dispatch, x)
    h = torch.einsum("ngpd,ndh->ngph", inputs, w1) + b1[:, None, None, :]
    h = F.gelu(h, approximate="tanh")
    y = torch.einsum("ngph,nhd->ngpd", h, w2) + b2[:, None, None, :]
    return torch.einsum("gmnp,ngpd->gmd", combine, y)


def soft_bmm(x, phi, scale, w1, b1, w2, b2):
    """The same with matmul / bmm / baddbmm and views (no einsum)."""
    import torch
    import torch.nn.functional as F
    G, S, D = x.shape
    _, E, P = phi.shape
    xn, pn = _soft_logits(x, phi, scale)
    logits = torch.matmul(xn, pn.reshape(D, E * P))        # [G, S, J]
    dispatch = torch.softmax(logits, dim=1)
    combine = torch.softmax(logits, dim=-1)
    slots = torch.bmm(dispatch.transpose(1, 2), x)         # [G, J, D]
    rows = slots.view(G, E, P, D).transpose(0, 1).reshape(E, G * P, D)
    h = F.gelu(torch.baddbmm(b1.unsqueeze(1), rows, w1), approximate="tanh")
    y = torch.baddbmm(b2.unsqueeze(1), h, w2)               # [E, G*P, D]
    y = y.view(E, G, P, D).transpose(0, 1).reshape(G, E * P, D)
    return torch.bmm(combine, y)


_TORCH_FUNCTIONS = {
    ("expert_choice", "torch gather"): ec_gather,
    ("expert_choice", "torch einsum"): ec_einsum,
    ("expert_choice", "torch loop"): ec_loop,
    ("soft", "torch einsum"): soft_einsum,
    ("soft", "torch bmm"): soft_bmm,
    ("decoder", "torch loop"): dec_loop,
    ("decoder", "torch gather"): dec_gather,
}


# ---------------------------------------------------------------- children

def _compiled_child(job, inputs):
    size = job["size"]
    G, S, D = (size[n] for n in "GSD")
    library = ctypes.CDLL(job["library"])
    layer = library._mlir_ciface_moe_layer
    layer.restype = None
    out = np.full((G, S, D), np.nan, dtype=np.float32)
    if job["impl"] == PACKED:  # once, as the model runtime does at load
        inputs = dict(inputs, w1=base.pack_panels(inputs["w1"]),
                      w2=base.pack_panels(inputs["w2"]))
    descriptors = [as_memref(inputs[n]) for n in input_names(size)]
    args = [ctypes.byref(d) for d in descriptors + [as_memref(out)]]
    baseline = base._maxrss_mb()
    times = base._time_calls(lambda: layer(*args), job["warmup"],
                             job["repeats"])
    return out, times, base._maxrss_mb() - baseline


def _torch_child(job, inputs):
    import torch
    torch.set_num_threads(job["threads"])
    size, B = job["size"], job["B"]
    G, S, D, H, E = (size[n] for n in "GSDHE")
    t = {n: torch.from_numpy(a) for n, a in inputs.items()}
    if job["impl"] == ROOFLINE:
        count = rows(size, B)
        a = t["x"].reshape(G * S, D)[torch.arange(count) % (G * S)]
        first = "w_gate" if size["family"] == "decoder" else "w1"
        last = "w_down" if size["family"] == "decoder" else "w2"
        w1, w2 = t[first][0], t[last][0]
        h, y = torch.zeros(count, H), torch.zeros(count, D)
        h2 = torch.zeros(count, H)

        def call():
            torch.matmul(a, w1, out=h)
            if size["family"] == "decoder":  # the w_up GEMM of SwiGLU
                torch.matmul(a, w1, out=h2)
            torch.matmul(h, w2, out=y)
            return None
    else:
        function = _TORCH_FUNCTIONS[(size["family"], job["impl"])]
        args = [t[n] for n in input_names(size)]
        if size["family"] == "expert_choice":
            args.append(B)
        if size["family"] == "decoder":
            args += [size["k"], size["order"], B]

        def call():
            return function(*args)
    result = {}
    with torch.inference_mode():
        baseline = base._maxrss_mb()
        times = base._time_calls(lambda: result.update(out=call()),
                                 job["warmup"], job["repeats"])
        peak = base._maxrss_mb() - baseline
    out = None if result["out"] is None else result["out"].numpy()
    return out, times, peak


def child_main(job_path):
    with open(job_path) as f:
        job = json.load(f)
    inputs = {n: np.load(os.path.join(job["data_dir"], n + ".npy"))
              for n in input_names(job["size"])}
    run = _compiled_child if job["impl"] in COMPILED_IMPLS else _torch_child
    out, times, peak = run(job, inputs)
    if out is not None:
        np.save(os.path.join(job["out_dir"], "out.npy"), out)
    result = dict(median_ms=base._median_ms(times), min_ms=min(times) * 1e3,
                  max_ms=max(times) * 1e3, times_ms=[s * 1e3 for s in times],
                  peak_extra_rss_mb=peak)
    with open(os.path.join(job["out_dir"], "result.json"), "w") as f:
        json.dump(result, f)


def run_child(job, job_dir):
    os.makedirs(job_dir, exist_ok=True)
    job = dict(job, out_dir=job_dir)
    job_path = os.path.join(job_dir, "job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    n = str(job["threads"])
    env = dict(os.environ, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n,
               MKL_NUM_THREADS=n)
    if job["impl"] not in COMPILED_IMPLS:
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        done = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--child", job_path],
            capture_output=True, text=True, env=env, timeout=900)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{job['impl']} ({n} threads) timed out")
    if done.returncode != 0:
        with open(os.path.join(job_dir, "error.log"), "w") as f:
            f.write(done.stderr)
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise BenchError(f"{job['impl']} ({n} threads) failed: {last}")
    with open(os.path.join(job_dir, "result.json")) as f:
        return json.load(f)


# --------------------------------------------------------------------- main

def bench_size(name, args, workdir):
    size = SIZES[name]
    B = capacity(size)
    size_dir = os.path.join(workdir, name)
    data_dir = os.path.join(size_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    for n, array in draw_inputs(name, size, B).items():
        np.save(os.path.join(data_dir, n + ".npy"), array)
    # The compiled variants: plain weights, packed weights (expert choice
    # and Soft MoE), plain weights by the baseline vmoe-opt.
    variants = [(COMPILED, False, None)]
    if size["family"] != "decoder":
        variants.append((PACKED, True, None))
    if args.baseline_vmoe_opt:
        variants.append((BASELINE, False, args.baseline_vmoe_opt))
    libraries, seconds = {}, 0.0
    for impl, packed, vmoe_opt in variants:
        tag = impl.replace(" ", "_")
        mlir_path = os.path.join(size_dir, f"layer-{tag}.mlir")
        with open(mlir_path, "w") as f:
            f.write(emit_mlir(size, B, packed=packed))
        out_dir = os.path.join(size_dir, "compiled", tag)
        os.makedirs(out_dir, exist_ok=True)
        libraries[impl], took = base.compile_module(
            mlir_path, pipeline(args.vector_width), out_dir, args,
            vmoe_opt=vmoe_opt)
        if impl == COMPILED:
            seconds = took
        print(f"{name}: {impl} compiled in {took:.1f} s", flush=True)
    compiled_impls = tuple(libraries)
    styles = TORCH_STYLES[size["family"]]
    impls = (*compiled_impls, *styles, ROOFLINE)
    gflop = 2.0 * gemms(size) * rows(size, B) * size["D"] * size["H"] / 1e9
    record = {"size": size, "B_or_P": B, "expert_gflop": gflop,
              "compile_seconds": seconds, "configurations": {}}
    outputs = []
    for threads in args.thread_counts:
        load = os.getloadavg()[0]
        rounds, errors = [], {}
        for index in range(args.rounds):
            rounds.append({})
            for impl in impls:
                job_dir = os.path.join(size_dir, f"t{threads}", f"r{index}",
                                       impl.replace(" ", "_"))
                rounds[-1][impl] = run_child(
                    {"impl": impl, "size": size, "B": B,
                     "threads": threads, "data_dir": data_dir,
                     "warmup": args.warmup, "repeats": args.repeats,
                     "library": libraries.get(impl)}, job_dir)
                rounds[-1][impl]["dir"] = job_dir
        results = {impl: dict(
            rounds[0][impl],
            median_ms=statistics.median(r[impl]["median_ms"] for r in rounds),
            min_ms=min(r[impl]["min_ms"] for r in rounds),
            round_medians_ms=[r[impl]["median_ms"] for r in rounds])
            for impl in impls}
        ratios = [min(r[s]["median_ms"] for s in styles) /
                  r[COMPILED]["median_ms"] for r in rounds]
        compiled = np.load(os.path.join(results[COMPILED]["dir"], "out.npy"))
        outputs.append(compiled)
        for style in styles:
            got = np.load(os.path.join(results[style]["dir"], "out.npy"))
            errors[style] = base.relative_error(got, compiled)
        # Same arithmetic: bit for bit the output of `vmoe`.
        for impl in compiled_impls[1:]:
            got = np.load(os.path.join(results[impl]["dir"], "out.npy"))
            if not np.array_equal(got, compiled):
                raise BenchError(f"{name} t{threads}: {impl} differs from "
                                 f"{COMPILED} (max rel err "
                                 f"{base.relative_error(got, compiled):.2e})",
                                 1)
        # Per-round ratios of the compiled variants: vmoe / vmoe packed
        # (the cost of repacking per call), vmoe before / vmoe.
        variant_ratios = {}
        for impl in compiled_impls[1:]:
            first, second = ((COMPILED, impl) if impl == PACKED
                             else (impl, COMPILED))
            per_round = [r[first]["median_ms"] / r[second]["median_ms"]
                         for r in rounds]
            variant_ratios[f"{first} / {second}"] = dict(
                median=statistics.median(per_round), per_round=per_round)
        fastest = min(styles, key=lambda s: results[s]["median_ms"])
        for r in results.values():
            r["gflops"] = gflop / (r["median_ms"] / 1e3)
            r["vs_fastest_torch"] = (r["median_ms"] /
                                     results[fastest]["median_ms"])
        ratio = statistics.median(ratios)
        what = (f"P={B}" if size["family"] == "soft"
                else f"C={size['C']} B={B}")
        print(f"\n== {name} ({threads} thread{'s' * (threads > 1)}, load "
              f"average {load:.1f} before): {size['family']} G={size['G']} "
              f"S={size['S']} D={size['D']} H={size['H']} E={size['E']} "
              f"{what}")
        print(f"{'implementation':<16}{'median ms':>10}{'min ms':>9}"
              f"{'GFLOP/s':>9}{'/torch':>8}{'RSS MB':>8}{'max rel err':>13}")
        for impl in impls:
            r = results[impl]
            err = f"{errors[impl]:.1e}" if impl in errors else ""
            print(f"{impl:<16}{r['median_ms']:>10.2f}{r['min_ms']:>9.2f}"
                  f"{r['gflops']:>9.1f}{r['vs_fastest_torch']:>8.2f}"
                  f"{r['peak_extra_rss_mb']:>8.1f}{err:>13}")
        spread = (f" (rounds: {min(ratios):.2f} .. {max(ratios):.2f})"
                  if len(ratios) > 1 else "")
        print(f"fastest torch / vmoe = {ratio:.2f}{spread}; fastest torch "
              f"style by median: {fastest}; load average after "
              f"{os.getloadavg()[0]:.1f}")
        for what, v in variant_ratios.items():
            print(f"{what} = {v['median']:.2f} (rounds: "
                  + ", ".join(f"{x:.2f}" for x in v["per_round"]) + ")")
        for impl in compiled_impls:
            print(f"{impl} / sgemm roofline = "
                  f"{results[impl]['median_ms'] / results[ROOFLINE]['median_ms']:.2f}")
        record["configurations"][f"threads={threads}"] = {
            "threads": threads, "load_average_before": load,
            "results": results, "max_rel_err": errors,
            "load_average_after": os.getloadavg()[0],
            "fastest_torch": fastest, "fastest_torch_over_vmoe": ratio,
            "fastest_torch_over_vmoe_per_round": ratios,
            "compiled_variant_ratios": variant_ratios}
        for style, err in errors.items():
            if not err < TORCH_VS_COMPILED_RTOL:
                raise BenchError(f"{name} t{threads}: {style} vs vmoe max "
                                 f"rel err {err:.2e}", 1)
    for out in outputs[1:]:
        if not np.array_equal(out, outputs[0]):
            raise BenchError(f"{name}: compiled output depends on the thread "
                             "count", 1)
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vmoe-opt",
                        default=os.path.join(base._REPO, "build/bin/vmoe-opt"))
    parser.add_argument("--mlir-translate",
                        default="/usr/lib/llvm-22/bin/mlir-translate")
    parser.add_argument("--clang", default="clang-22")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--vector-width", type=int,
                        default=default_vector_width(),
                        help="f32 lanes of the compiled kernels (default: "
                             "16 with AVX-512, else 8)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="time every implementation this many times, "
                             "round-robin (default 1)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--json", default=os.path.join(
        _BENCH_DIR, "results-families.json"))
    parser.add_argument("--quick", action="store_true",
                        help="3 repeats, ec-s32 and soft-s32, 1 thread")
    parser.add_argument("--workdir")
    parser.add_argument("--baseline-vmoe-opt",
                        help="also time the plain layer compiled by this "
                             "vmoe-opt (`vmoe before`)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(args.child)
        return 0
    if args.quick:
        args.repeats, args.sizes, args.threads = 3, "ec-s32,soft-s32", "1"
    args.thread_counts = [int(n) for n in args.threads.split(",")]
    unknown = [s for s in args.sizes.split(",") if s not in SIZES]
    if unknown:
        parser.error(f"--sizes: unknown {unknown}; known: {list(SIZES)}")
    workdir = args.workdir or tempfile.mkdtemp(prefix="vmoe-family-bench-")
    os.makedirs(workdir, exist_ok=True)
    report = {"machine": base.machine_info(args.thread_counts),
              "command": sys.argv, "repeats": args.repeats,
              "rounds": args.rounds,
              "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY",
                                                "default"),
              "pipeline": pipeline(args.vector_width), "sizes": {}}
    status = 0
    try:
        args.vmoe_opt = base.snapshot_vmoe_opt(args.vmoe_opt, workdir)
        if args.baseline_vmoe_opt:
            args.baseline_vmoe_opt = base.snapshot_vmoe_opt(
                args.baseline_vmoe_opt, workdir, "vmoe-opt-before")
        report["compiler"] = base.compiler_info(args)
        for name in args.sizes.split(","):
            report["sizes"][name] = bench_size(name, args, workdir)
    except BenchError as error:
        print(f"family_layer_bench: error: {error} [work files: {workdir}]",
              file=sys.stderr)
        report["error"] = str(error)
        status = error.status
    else:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        if status == 0:
            print(f"\nresults written to {args.json}")
    return status


if __name__ == "__main__":
    sys.exit(main())
