"""Layer cases of decoder-style MoE blocks and auxiliary losses (SPEC §8).

The part of the case matrix (vmoe_tools.cases) for `routing` = "decoder":
vmoe.route (Switch k = 1, Mixtral top-2 KeepTopK renormalized, any k up
to E), vmoe.dispatch with a capacity C or dropless (`dropless=True`: C =
E/k, so B = S and nothing drops), vmoe.expert_swiglu, vmoe.combine, an
optional shared SwiGLU expert every token passes through (`shared=True`),
and vmoe.router_losses on the same router (`losses=True`). With
`noise_std` the case is a training graph: a noise input feeds both the
router and the losses.

Inputs are the coarse token choice draw (logits exact in f32); the noise is
a multiple of 1/16 and noise_std / E a power of two, so noisy logits are
exact too and routing is decided identically in f32 and f64.
"""

import numpy as np
import torch

import vmoe_ref

DECODER = "decoder"
ROUTINGS = (DECODER,)
LOSSES = ("importance", "load", "gshard")


def size(case):
    """Fills in B (dropless: S) and the capacity ratio the dispatch gets."""
    if case["dropless"]:
        case["C"] = vmoe_ref.dropless_ratio(case["k"], case["E"])
    case["B"] = vmoe_ref.sized_capacity(case["k"], case["S"], case["C"],
                                        case["E"])
    if case["dropless"] and case["B"] != case["S"]:
        raise ValueError(f"{case['name']}: dropless B {case['B']} != S")
    case["runtime_capacity"] = None


def matrix(make):
    """The decoder cases; `make(name, **params)` is cases._case."""
    dec, mix = DECODER, dict(order="topk_softmax", normalize=True)
    return [
        # Mixtral: top-2 of 8, KeepTopK renormalized; dropless and capped.
        make("dec_mixtral_dropless", routing=dec, E=8, k=2, dropless=True,
             **mix),
        make("dec_mixtral_c1_g3", routing=dec, G=3, E=8, k=2, C=1.0, **mix),
        make("dec_mixtral_shared_dropless", routing=dec, E=8, k=2,
             dropless=True, shared=True, **mix),
        # Switch: k = 1, capacity 1.25 and dropless.
        make("dec_switch_c1.25", routing=dec, k=1, C=1.25),
        make("dec_switch_dropless_g3", routing=dec, G=3, k=1, dropless=True),
        # k = E, odd sizes, ties, one expert.
        make("dec_k_eq_e_dropless", routing=dec, E=4, k=4, dropless=True,
             **mix),
        make("dec_odd_sizes_shared", routing=dec, S=37, D=13, H=19, E=8,
             k=2, dropless=True, shared=True, **mix),
        make("dec_ties_dropless", routing=dec, S=40, k=2, dropless=True,
             pattern="ties", **mix),
        make("dec_ties_c0.5", routing=dec, S=40, k=2, C=0.5, pattern="ties",
             **mix),
        make("dec_wide", routing=dec, S=20, D=520, H=530, E=4, k=2,
             dropless=True, **mix),
        # Auxiliary losses: inference (no noise, load 0) and training
        # graphs (noise on the router and in the losses).
        make("dec_losses_inference_g3", routing=dec, G=3, E=8, k=2,
             dropless=True, losses=True, **mix),
        make("dec_losses_noisy_k2_g3", routing=dec, G=3, E=8, k=2,
             dropless=True, losses=True, noise_std=1.0, **mix),
        make("dec_losses_noisy_k1_e32", routing=dec, S=50, E=32, k=1,
             C=1.0, losses=True, noise_std=2.0),
        make("dec_losses_noisy_k_eq_e", routing=dec, E=4, k=4,
             dropless=True, losses=True, noise_std=1.0, **mix),
    ]


# ----------------------------------------------------------------- inputs

def draw(case, rng, coarse_draw):
    """The coarse draw's x and router, SwiGLU weights, shared weights and
    noise as the case needs them."""
    base = coarse_draw(case, rng)
    D, H, E = case["D"], case["H"], case["E"]

    def normal(*shape):
        return rng.standard_normal(shape) * 0.1

    arrays = dict(x=base["x"], router=base["router"],
                  w_gate=normal(E, D, H), w_up=normal(E, D, H),
                  w_down=normal(E, H, D))
    if case["shared"]:
        arrays.update(s_gate=normal(1, D, H), s_up=normal(1, D, H),
                      s_down=normal(1, H, D))
    if case["noise_std"] is not None:
        noise = rng.standard_normal((case["G"], case["S"], E))
        arrays["noise"] = np.round(noise * 16) / 16
    return {name: np.ascontiguousarray(a, dtype=np.float32)
            for name, a in arrays.items()}


def robust(case, inputs, separation):
    """Whether top-k of every token is immune to last-ulp differences:
    distinct (noisy) logits of a token are well apart."""
    logits = inputs["x"].astype(np.float64) @ inputs["router"].astype(
        np.float64)
    if case["noise_std"] is not None:
        logits = logits + inputs["noise"] * (case["noise_std"] / case["E"])
    ranked = -np.sort(-logits, axis=-1)
    step = ranked[..., :-1] - ranked[..., 1:]
    scale = np.maximum(np.abs(ranked[..., :-1]), 1.0)
    return not np.any((step > 0) & (step <= separation * scale))


def input_names(case):
    """The input memrefs of `@moe_case`, in order."""
    names = ["x", "router", "w_gate", "w_up", "w_down"]
    if case["shared"]:
        names += ["s_gate", "s_up", "s_down"]
    if case["noise_std"] is not None:
        names.append("noise")
    return tuple(names)


# -------------------------------------------------------------- reference

def _run(case, inputs, dtype):
    t = {name: torch.from_numpy(a).to(dtype) for name, a in inputs.items()}
    shared = ((t["s_gate"], t["s_up"], t["s_down"]) if case["shared"]
              else None)
    noise = t.get("noise")
    result = vmoe_ref.decoder_moe_layer(
        t["x"], t["router"], t["w_gate"], t["w_up"], t["w_down"],
        k=case["k"], num_experts=case["E"],
        capacity_ratio=None if case["dropless"] else case["C"],
        order=case["order"], normalize=case["normalize"], shared=shared,
        noise=noise, noise_std=case["noise_std"])
    if case["losses"]:
        result.update(vmoe_ref.router_losses(
            t["x"], t["router"], case["k"], noise=noise,
            noise_std=case["noise_std"]))
    return result


def reference(case, inputs):
    """ids and slots of the float32 reference (equal to the float64 ones),
    `out` and the losses in float64 from the same float32 inputs."""
    single = _run(case, inputs, torch.float32)
    double = _run(case, inputs, torch.float64)
    ref = {"out": double["out"].numpy()}
    for key in ("ids", "slots"):
        if not torch.equal(single[key], double[key]):
            raise RuntimeError(f"{case['name']}: {key} depend on precision")
        ref[key] = single[key].numpy()
    assert single["B"] == case["B"]
    if case["losses"]:
        for key in LOSSES:
            ref[key] = double[key].numpy()
    stats = vmoe_ref.routing_stats(single["ids"], single["slots"], case["E"])
    ref["dropped"] = stats["dropped"]
    if case["dropless"]:
        assert ref["dropped"] == 0, case["name"]
    return ref


# -------------------------------------------------------------------- MLIR

def output_specs(case):
    """(name, shape, numpy dtype) of the destination memrefs, in order."""
    G, S, D, k = case["G"], case["S"], case["D"], case["k"]
    specs = [("ids", (G, S, k), np.int32), ("slots", (G, S, k), np.int32),
             ("out", (G, S, D), np.float32)]
    if case["losses"]:
        specs += [(name, (G,), np.float32) for name in LOSSES]
    return specs


def _tensor(shape, element="f32"):
    return "tensor<" + "x".join(str(n) for n in shape) + f"x{element}>"


def _memref(shape, element="f32"):
    return "memref<" + "x".join(str(n) for n in shape) + f"x{element}>"


def emit_body(case, dict_attr, f64):
    """(arguments, body lines) of `@moe_case`; dict_attr and f64 are the
    attribute helpers of cases.py."""
    G, S, D, H, E, k, B = (case[n] for n in "GSDHEkB")
    t_x, t_router = _tensor((G, S, D)), _tensor((D, E))
    t_gates, t_w = _tensor((G, S, E)), _tensor((G, S, k))
    t_ids = _tensor((G, S, k), "i32")
    t_buf = _tensor((E, G, B, D))
    t_up, t_down = _tensor((E, D, H)), _tensor((E, H, D))
    types = {"x": t_x, "router": t_router, "w_gate": t_up, "w_up": t_up,
             "w_down": t_down, "s_gate": _tensor((1, D, H)),
             "s_up": _tensor((1, D, H)), "s_down": _tensor((1, H, D)),
             "noise": t_gates}
    args = [f"%{name}: {types[name]}" for name in input_names(case)]
    noise = ""
    route_attrs = [f"k = {k} : i64"]
    if case["order"] != "softmax_topk":
        route_attrs.append(f"order = #vmoe.route_order<{case['order']}>")
    if case["normalize"]:
        route_attrs.append("normalize = true")
    noise_attrs = []
    if case["noise_std"] is not None:
        noise = f" noise(%noise : {t_gates})"
        noise_attrs.append(f"noise_std = {f64(case['noise_std'])}")
    body = [
        f"%gates, %ids, %weights = vmoe.route %x, %router{noise}"
        f"{dict_attr(route_attrs + noise_attrs)}",
        f"    : {t_x}, {t_router} -> {t_gates}, {t_ids}, {t_w}",
        f"%buffers, %slots = vmoe.dispatch %x, %ids"
        f" {{capacity_ratio = {f64(case['C'])}}}",
        f"    : {t_x}, {t_ids} -> {t_buf}, {t_ids}",
        "%y = vmoe.expert_swiglu %buffers, %w_gate, %w_up, %w_down",
        f"    : {t_buf}, {t_up}, {t_up}, {t_down}",
        "%routed = vmoe.combine %y, %ids, %slots, %weights",
        f"    : {t_buf}, {t_ids}, {t_ids}, {t_w} -> {t_x}",
    ]
    if case["shared"]:
        t_one = _tensor((1, G, S, D))
        body += [
            f"%xs = tensor.expand_shape %x [[0, 1], [2], [3]] "
            f"output_shape [1, {G}, {S}, {D}] : {t_x} into {t_one}",
            "%ys = vmoe.expert_swiglu %xs, %s_gate, %s_up, %s_down",
            f"    : {t_one}, {types['s_gate']}, {types['s_up']}, "
            f"{types['s_down']}",
            f"%yc = tensor.collapse_shape %ys [[0, 1], [2], [3]] : {t_one} "
            f"into {t_x}",
            f"%init = tensor.empty() : {t_x}",
            f"%out = linalg.add ins(%routed, %yc : {t_x}, {t_x}) "
            f"outs(%init : {t_x}) -> {t_x}",
        ]
    else:
        body.append(f"%out = tensor.cast %routed : {t_x} to {t_x}")
    results = {"ids": t_ids, "slots": t_ids, "out": t_x}
    if case["losses"]:
        t_loss = _tensor((G,))
        body += [
            f"%importance, %load, %gshard = vmoe.router_losses %x, %router"
            f"{noise}{dict_attr([f'k = {k} : i64'] + noise_attrs)}",
            f"    : {t_x}, {t_router} -> {t_loss}, {t_loss}, {t_loss}",
        ]
        results.update({name: t_loss for name in LOSSES})
    for name, shape, dtype in output_specs(case):
        element = "i32" if dtype == np.int32 else "f32"
        args.append(f"%{name}_out: {_memref(shape, element)}")
        body.append(f"bufferization.materialize_in_destination %{name} in "
                    f"restrict writable %{name}_out : ({results[name]}, "
                    f"{_memref(shape, element)}) -> ()")
    body.append("return")
    return args, body
