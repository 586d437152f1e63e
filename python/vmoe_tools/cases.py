"""The integration case matrix of whole MoE layers, and its MLIR emitter.

A case is a dict of layer parameters (see `_DEFAULTS`). For each case this
module draws inputs (`make_inputs`), writes a tensor-level function
`@moe_case` of vmoe ops in destination-passing style (`emit_mlir`), and
computes the PyTorch reference (`reference`).

Routing must not depend on last-ulp differences between our kernels and
torch's, so inputs are coarse and exactly representable: x is a multiple of
1/4 in [-1, 1] and the router a multiple of 1/8 (in [-1/2, 1/2], but for
the entry that makes expert 0 win in pattern "one_expert"), which makes
every logit exact in f32 whatever the summation order. Inputs are then
redrawn while two different gates of a token, or two BPR scores of tokens
with different max-centred logit rows, are within 1e-5 relative (checked
in float64). Exact ties are kept on purpose: equal logits, and rows equal
after subtracting the row maximum (as every stable softmax does), give
bit-identical gates everywhere, so they exercise the tie rules safely.
The expert weights are random normals (their rounding only affects `out`).
"""

import math
import zlib

import numpy as np
import torch

import vmoe_ref

from . import decoder_cases, family_cases

_DEFAULTS = dict(
    G=1, S=30, D=20, H=24, E=4, k=2, C=1.0,
    routing="vanilla",         # or "bpr"; "expert_choice", "soft": see
                               # family_cases.py
    score="max",               # BPR priority: "max" or "sum_topk" (with k)
    capacity_rule="round",     # or "ceil"
    multiple_of=1,
    activation="gelu_tanh",
    order="softmax_topk",      # or "topk_softmax"
    normalize=False,
    runtime_ratio=None,        # runtime C passed to vmoe.capacity (f64 arg)
    static_b=False,            # buffers typed with a static B, not `?`
    num_valid=None,            # dispatch `valid` operand: tokens g*S + t
                               # >= num_valid are not routed
    pattern="random",          # or "ties", "one_expert"
    P=None,                    # Soft MoE slots per expert (None: round(S/E))
    dropless=False,            # decoder: C = E/k, B = S (decoder_cases.py)
    shared=False,              # decoder: one shared SwiGLU expert
    losses=False,              # decoder: vmoe.router_losses outputs
    noise_std=None,            # decoder: noisy gating (training graph)
)

# Two distinct gates of a token, or two BPR scores, closer than this
# (relative) could be ordered differently by two correct implementations.
_SEPARATION = 1e-5
_MAX_ATTEMPTS = 200


def _case(name, **params):
    unknown = set(params) - set(_DEFAULTS)
    if unknown:
        raise ValueError(f"{name}: unknown parameters {sorted(unknown)}")
    # The seed depends on the name only: adding a case changes no inputs.
    case = dict(_DEFAULTS, name=name, seed=zlib.crc32(name.encode()),
                **params)
    if case["routing"] in family_cases.ROUTINGS:
        family_cases.size(case)
        return case
    if case["routing"] in decoder_cases.ROUTINGS:
        decoder_cases.size(case)
        return case
    if not 1 <= case["k"] <= case["E"]:
        raise ValueError(f"{name}: k must be in [1, E]")
    case["B"] = vmoe_ref.sized_capacity(case["k"], case["S"], case["C"],
                                        case["E"], case["capacity_rule"],
                                        case["multiple_of"])
    if case["runtime_ratio"] is not None:
        case["runtime_capacity"] = vmoe_ref.runtime_capacity(
            case["k"], case["S"], case["runtime_ratio"], case["E"],
            case["B"], case["capacity_rule"], case["multiple_of"])
    else:
        case["runtime_capacity"] = None
    return case


def _matrix():
    """The case list; trailing comments give the sized capacity B."""
    bpr, max_, sum_ = "bpr", "max", "sum_topk"
    cases = [
        # Vanilla routing: k = 1, 2; E = 1, 4, 32; G = 1, 3; every C.
        _case("vanilla_k1_e4", k=1, C=1.0),                    # B 8 (7.5)
        _case("vanilla_k2_e4_g3", G=3, H=32, C=1.05),          # B 16
        _case("vanilla_k2_e32", S=50, D=36, H=40, E=32, C=2.0),  # B 6
        _case("vanilla_k1_e1_g3", G=3, S=21, D=12, H=16, E=1, k=1,
              C=0.5),                                          # B 10 (10.5)
        _case("vanilla_k1_e1_c2", S=21, D=12, H=16, E=1, k=1, C=2.0),  # 42
        _case("vanilla_k2_c0.1", S=50, C=0.1),                 # B 2 (2.5)
        _case("vanilla_k2_c0.5_g3", G=3, S=45, C=0.5),         # B 11
        # BPR with the max score: every C for k = 2; k = 1; E = 1, 32.
        _case("bpr_max_k2_c0.1", S=50, routing=bpr, C=0.1),    # B 2
        _case("bpr_max_k2_c0.5_g3", G=3, S=50, routing=bpr, C=0.5),  # 12
        _case("bpr_max_k2_c1.0", S=50, routing=bpr, C=1.0),    # B 25
        _case("bpr_max_k2_c1.05_g3", G=3, S=50, routing=bpr, C=1.05),  # 26
        _case("bpr_max_k2_c2.0", S=50, routing=bpr, C=2.0),    # B 50
        _case("bpr_max_k1_c0.5_g3", G=3, S=37, k=1, routing=bpr,
              C=0.5),                                          # B 5
        _case("bpr_max_k1_c2.0", S=37, k=1, routing=bpr, C=2.0),  # B 18
        _case("bpr_max_k2_e32_g3", G=3, S=70, D=36, H=40, E=32,
              routing=bpr, C=1.05),                            # B 5
        _case("bpr_max_k1_e1_g3", G=3, S=21, D=12, H=16, E=1, k=1,
              routing=bpr, C=0.5),                             # B 10
        # BPR with the sum_topk score.
        _case("bpr_sum_k2_c0.1", S=50, routing=bpr, score=sum_, C=0.1),
        _case("bpr_sum_k2_c0.5_g3", G=3, S=45, routing=bpr, score=sum_,
              C=0.5),                                          # B 11
        _case("bpr_sum_k2_c1.0_e32", S=67, D=28, H=36, E=32, routing=bpr,
              score=sum_, C=1.0),                              # B 4
        _case("bpr_sum_k2_c1.05_e32_g3", G=3, S=70, D=28, H=36, E=32,
              routing=bpr, score=sum_, C=1.05),                # B 5
        _case("bpr_sum_k2_c2.0", S=45, routing=bpr, score=sum_, C=2.0),
        _case("bpr_sum_k1_c1.05_g3", G=3, S=37, k=1, routing=bpr,
              score=sum_, C=1.05),                             # B 10
        # B = 1 (C = 0.1 with E = 32 under ceil), and the SPEC §4 example.
        _case("b1_vanilla_k2_e32_g3", G=3, S=50, E=32, C=0.1,
              capacity_rule="ceil"),
        _case("b1_bpr_max_k2_e32", S=50, E=32, routing=bpr, C=0.1,
              capacity_rule="ceil"),
        _case("b1_bpr_max_k1_e4", S=50, k=1, routing=bpr, C=0.1),  # 1.25
        _case("ceil_multiple4_bpr_e32", S=32, D=12, H=16, E=32,
              routing=bpr, C=1.0, capacity_rule="ceil", multiple_of=4),
        _case("round_multiple4_vanilla_k1_g3", G=3, S=37, k=1, C=1.0,
              multiple_of=4),                                  # 9 -> 12
        # k = E: every token sends a row to every expert.
        _case("k_eq_e_bpr_max_c0.5", S=30, k=4, routing=bpr, C=0.5),  # 15
        _case("k_eq_e_vanilla_e2_g3", G=3, S=25, D=12, H=16, E=2, k=2,
              C=0.5),                                          # B 12
        # Exact ties: duplicated tokens and a duplicated router column.
        _case("ties_bpr_max_k2_g3", G=3, S=40, routing=bpr, C=0.5,
              pattern="ties"),
        _case("ties_bpr_sum_k2", S=40, routing=bpr, score=sum_, C=1.0,
              pattern="ties"),
        _case("ties_vanilla_k1_g3", G=3, S=40, k=1, C=1.05, pattern="ties"),
        # Every token's first choice is expert 0.
        _case("one_expert_vanilla_k1_g3", G=3, k=1, C=1.0,
              pattern="one_expert"),
        _case("one_expert_bpr_max_k2_e32", S=50, E=32, routing=bpr,
              C=1.05, pattern="one_expert"),                   # B 3
        _case("one_expert_bpr_sum_k2_g3", G=3, routing=bpr, score=sum_,
              C=1.0, pattern="one_expert"),                    # B 15
        # Runtime capacity below (and once above) the compiled maximum.
        _case("runtime_bpr_max_k2_g3", G=3, S=50, routing=bpr, C=2.0,
              runtime_ratio=0.5),                              # 50, 12
        _case("runtime_vanilla_k1_e32", S=70, E=32, k=1, C=2.0,
              runtime_ratio=1.0),                              # 4, 2
        _case("runtime_bpr_sum_ceil_multiple4", S=50, routing=bpr,
              score=sum_, C=1.05, capacity_rule="ceil", multiple_of=4,
              runtime_ratio=0.1),                              # 28, 4
        _case("runtime_zero_drops_all", routing=bpr, C=1.0,
              runtime_ratio=0.0),                              # 15, 0
        _case("runtime_above_max_clamped", routing=bpr, C=1.0,
              runtime_ratio=4.0),                              # 15, 15
        # Activations, route orders, normalization, static B, odd sizes.
        _case("act_gelu_erf_vanilla_k2", activation="gelu_erf"),
        _case("act_relu_bpr_max_k1", k=1, routing=bpr, C=1.05,
              activation="relu"),
        _case("act_silu_bpr_sum_k2_g3", G=3, routing=bpr, score=sum_,
              activation="silu"),
        _case("topk_softmax_bpr_max_k2", S=45, routing=bpr, C=1.05,
              order="topk_softmax"),
        _case("normalize_vanilla_k2_g3", G=3, C=1.05, normalize=True),
        _case("topk_softmax_normalize_bpr_sum_k2", routing=bpr, score=sum_,
              order="topk_softmax", normalize=True),
        _case("static_b_bpr_max_k2_g3", G=3, S=45, routing=bpr, C=1.05,
              static_b=True),
        _case("odd_sizes_bpr_max_k2", S=37, D=13, H=19, routing=bpr,
              C=1.05),                                         # B 19
        # Slot assignment at scale (the GPU's per-expert warp scan walks
        # k*S entries 32 at a time, 4 experts per block): one large group,
        # experts overflowing, E not a multiple of 4, padding masked.
        _case("scan_g1_bpr_max_k2_e6_valid", S=500, D=16, H=8, E=6,
              routing=bpr, C=0.5, num_valid=437),              # B 83
        _case("scan_g1_vanilla_k2_e10_runtime", S=700, D=16, H=8, E=10,
              C=1.5, runtime_ratio=0.75),                      # 210, 105
        _case("scan_g3_bpr_sum_k2_e37_valid", G=3, S=130, D=16, H=8, E=37,
              routing=bpr, score=sum_, C=1.05, num_valid=150),  # B 7
    ]
    return (cases + family_cases.matrix(_case)
            + decoder_cases.matrix(_case))


CASES = _matrix()

# The smoke subset (check_layers --scope smoke): every routing family, and
# per family the edges that take their own code paths -- G > 1, E = 1 and
# E = 32, B = 1, multiple_of, k = E, exact ties, an overflowing expert,
# runtime capacity (0 too), activations, route order and normalization,
# static B, odd sizes, masked padding at scan scale, blocks past 256. The
# default suite runs the whole matrix with the default pipelines and this
# subset with the secondary ones (docs/Testing.md).
SMOKE = frozenset((
    "vanilla_k2_e4_g3", "vanilla_k1_e1_c2", "bpr_max_k2_e32_g3",
    "bpr_sum_k2_c1.05_e32_g3", "b1_bpr_max_k2_e32",
    "round_multiple4_vanilla_k1_g3", "k_eq_e_bpr_max_c0.5",
    "ties_bpr_max_k2_g3", "one_expert_bpr_sum_k2_g3",
    "runtime_bpr_sum_ceil_multiple4", "runtime_zero_drops_all",
    "act_silu_bpr_sum_k2_g3", "topk_softmax_normalize_bpr_sum_k2",
    "static_b_bpr_max_k2_g3", "odd_sizes_bpr_max_k2",
    "scan_g3_bpr_sum_k2_e37_valid",
    "ec_c2_e4_g3", "ec_runtime_c0.5_g3", "ec_ties_g3", "ec_odd_sizes",
    "ec_wide",
    "soft_p1_g3", "soft_pe_above_s_scale_x", "soft_odd_sizes_g3",
    "soft_wide",
    "dec_mixtral_c1_g3", "dec_switch_dropless_g3", "dec_odd_sizes_shared",
    "dec_losses_noisy_k2_g3", "dec_wide",
))
assert SMOKE <= {case["name"] for case in CASES}, "unknown SMOKE case"


# ----------------------------------------------------------------- inputs

def _draw(case, rng):
    """One draw of float32 inputs for `case` (see the module docstring)."""
    G, S, D, H, E = (case[n] for n in "GSDHE")
    x = rng.integers(-4, 5, (G, S, D)) / 4.0
    router = rng.integers(-4, 5, (D, E)) / 8.0
    if case["pattern"] == "ties":
        router[:, 1 % E] = router[:, 0]
        for g in range(G):  # about a third of the tokens repeat an earlier one
            for t in range(1, S):
                if rng.random() < 1 / 3:
                    x[g, t] = x[g, rng.integers(0, t)]
    elif case["pattern"] == "one_expert":
        # A constant feature whose router weight makes expert 0 win every
        # token by at least 1/2 (router stays a multiple of 1/8).
        x[..., 0] = 1.0
        router[0] = 0.0
        logits = x @ router
        deficit = (logits[..., 1:].max(-1) - logits[..., 0]).max()
        router[0, 0] = math.ceil((deficit + 0.5) * 8) / 8
    elif case["pattern"] != "random":
        raise ValueError(f"unknown pattern {case['pattern']!r}")

    def normal(*shape):
        return rng.standard_normal(shape) * 0.1

    arrays = dict(x=x, router=router, w1=normal(E, D, H), b1=normal(E, H),
                  w2=normal(E, H, D), b2=normal(E, D))
    return {name: np.ascontiguousarray(a, dtype=np.float32)
            for name, a in arrays.items()}


def _too_close(a, b):
    return abs(a - b) <= _SEPARATION * max(abs(a), abs(b))


def _robust(case, inputs):
    """Whether routing of `inputs` is immune to last-ulp differences."""
    logits = inputs["x"].astype(np.float64) @ inputs["router"].astype(
        np.float64)
    centred = logits - logits.max(-1, keepdims=True)
    gates = np.exp(centred)
    gates /= gates.sum(-1, keepdims=True)
    ranked = -np.sort(-gates, axis=-1)
    # Distinct gates of one token must be well apart (top-k selection).
    step = ranked[..., :-1] - ranked[..., 1:]
    if np.any((step > 0) & (step <= _SEPARATION * ranked[..., :-1])):
        return False
    if case["pattern"] == "ties":  # the 0/1 tie must reach some top-k
        k = case["k"]
        if not np.any(gates[..., 0] >= ranked[..., k - 1]):
            return False
    if case["routing"] != "bpr":
        return True
    count = case["k"] if case["score"] == "sum_topk" else 1
    scores = ranked[..., :count].sum(-1)
    for g in range(case["G"]):
        tokens = np.argsort(-scores[g], kind="stable")
        for a, b in zip(tokens[:-1], tokens[1:]):
            if (_too_close(scores[g, a], scores[g, b])
                    and not np.array_equal(centred[g, a], centred[g, b])):
                return False
    return True


def make_inputs(case):
    """Deterministic inputs for `case`: dict of float32 numpy arrays."""
    family = case["routing"] in family_cases.ROUTINGS
    for attempt in range(_MAX_ATTEMPTS):
        rng = np.random.default_rng([case["seed"], attempt])
        if case["routing"] in decoder_cases.ROUTINGS:
            inputs = decoder_cases.draw(case, rng, _draw)
            if decoder_cases.robust(case, inputs, _SEPARATION):
                return inputs
            continue
        inputs = family_cases.draw(case, rng, _draw) if family else \
            _draw(case, rng)
        if (family_cases.robust(case, inputs) if family
                else _robust(case, inputs)):
            return inputs
    raise RuntimeError(f"{case['name']}: no robust inputs in "
                       f"{_MAX_ATTEMPTS} draws")


def _run_reference(case, inputs, dtype):
    tensors = {name: torch.from_numpy(a).to(dtype)
               for name, a in inputs.items()}
    return vmoe_ref.moe_layer(
        tensors["x"], tensors["router"], tensors["w1"], tensors["b1"],
        tensors["w2"], tensors["b2"], k=case["k"], num_experts=case["E"],
        capacity_ratio=case["C"], routing=case["routing"],
        score=case["score"], capacity_rule=case["capacity_rule"],
        multiple_of=case["multiple_of"], activation=case["activation"],
        order=case["order"], normalize=case["normalize"],
        runtime_capacity=case["runtime_capacity"],
        num_valid=case["num_valid"])


def reference(case, inputs):
    """The expected ids, slots (int32) and out (float64) of `case`.

    The reference runs in float32, as specified, and again in float64 from
    the same float32 inputs: routing must agree exactly (else the inputs are
    not robust and this raises), and `out` is the float64 result, so that
    the comparison measures the compiled code's error alone.
    """
    if case["routing"] in family_cases.ROUTINGS:
        return family_cases.reference(case, inputs)
    if case["routing"] in decoder_cases.ROUTINGS:
        return decoder_cases.reference(case, inputs)
    single = _run_reference(case, inputs, torch.float32)
    double = _run_reference(case, inputs, torch.float64)
    for key in ("ids", "slots"):
        if not torch.equal(single[key], double[key]):
            raise RuntimeError(f"{case['name']}: {key} depend on precision")
    assert single["B"] == case["B"]
    valid = None
    if case["num_valid"] is not None:
        G, S = case["G"], case["S"]
        valid = torch.arange(G * S).reshape(G, S) < case["num_valid"]
    stats = vmoe_ref.routing_stats(single["ids"], single["slots"], case["E"],
                                   valid)
    return {"ids": single["ids"].numpy(), "slots": single["slots"].numpy(),
            "out": double["out"].numpy(), "dropped": stats["dropped"]}


# -------------------------------------------------------------------- MLIR

INPUT_NAMES = ("x", "router", "w1", "b1", "w2", "b2")


def input_names(case):
    """The input memrefs of `@moe_case`, in order."""
    if case["routing"] in family_cases.ROUTINGS:
        return family_cases.input_names(case)
    if case["routing"] in decoder_cases.ROUTINGS:
        return decoder_cases.input_names(case)
    return INPUT_NAMES


def output_specs(case):
    """(name, shape, numpy dtype) of the destination memrefs, in order."""
    if case["routing"] in family_cases.ROUTINGS:
        return family_cases.output_specs(case)
    if case["routing"] in decoder_cases.ROUTINGS:
        return decoder_cases.output_specs(case)
    G, S, D, k = case["G"], case["S"], case["D"], case["k"]
    return [("ids", (G, S, k), np.int32), ("slots", (G, S, k), np.int32),
            ("out", (G, S, D), np.float32)]


def _f64(value):
    """An MLIR f64 literal that parses back to exactly `value`."""
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + ("e" + exponent if exponent else "") + " : f64"


def _dict_attr(entries):
    """` {a, b}` (with a leading space), or nothing for no entries."""
    return " {" + ", ".join(entries) + "}" if entries else ""


def _capacity_attrs(case):
    attrs = []
    if case["capacity_rule"] != "round":
        attrs.append(f"capacity_rule = "
                     f"#vmoe.capacity_rule<{case['capacity_rule']}>")
    if case["multiple_of"] != 1:
        attrs.append(f"multiple_of = {case['multiple_of']} : i64")
    return attrs


def emit_mlir(case):
    """The function `@moe_case` computing `case`'s layer, as MLIR text."""
    if case["routing"] in family_cases.ROUTINGS:
        args, body = family_cases.emit_body(case, _dict_attr,
                                            _capacity_attrs)
        return _function(case, args, body)
    if case["routing"] in decoder_cases.ROUTINGS:
        return _function(case, *decoder_cases.emit_body(case, _dict_attr,
                                                        _f64))
    G, S, D, H, E, k = (case[n] for n in ("G", "S", "D", "H", "E", "k"))
    f32 = "xf32>"
    t_x, t_router = f"tensor<{G}x{S}x{D}{f32}", f"tensor<{D}x{E}{f32}"
    t_w1, t_b1 = f"tensor<{E}x{D}x{H}{f32}", f"tensor<{E}x{H}{f32}"
    t_w2, t_b2 = f"tensor<{E}x{H}x{D}{f32}", f"tensor<{E}x{D}{f32}"
    t_gates, t_w = f"tensor<{G}x{S}x{E}{f32}", f"tensor<{G}x{S}x{k}{f32}"
    t_ids, t_order = f"tensor<{G}x{S}x{k}xi32>", f"tensor<{G}x{S}xi32>"
    b_dim = str(case["B"]) if case["static_b"] else "?"
    t_buf = f"tensor<{E}x{G}x{b_dim}x{D}{f32}"
    m_ids, m_out = f"memref<{G}x{S}x{k}xi32>", f"memref<{G}x{S}x{D}{f32}"
    runtime = case["runtime_ratio"] is not None

    args = [f"%x: {t_x}", f"%router: {t_router}", f"%w1: {t_w1}",
            f"%b1: {t_b1}", f"%w2: {t_w2}", f"%b2: {t_b2}"]
    if runtime:
        args.append("%c: f64")
    args += [f"%ids_out: {m_ids}", f"%slots_out: {m_ids}",
             f"%out_out: {m_out}"]

    route_attrs = [f"k = {k} : i64"]
    if case["order"] != "softmax_topk":
        route_attrs.append(f"order = #vmoe.route_order<{case['order']}>")
    if case["normalize"]:
        route_attrs.append("normalize = true")
    body = [
        f"%gates, %ids, %weights = vmoe.route %x, %router"
        f"{_dict_attr(route_attrs)}",
        f"    : {t_x}, {t_router} -> {t_gates}, {t_ids}, {t_w}",
    ]
    dispatch_operands, dispatch_types = "%x, %ids", f"{t_x}, {t_ids}"
    if case["routing"] == "bpr":
        sort_attrs = []
        if case["score"] == "sum_topk":
            sort_attrs = ["score = #vmoe.priority_score<sum_topk>",
                          f"k = {k} : i64"]
        body.append(f"%order = vmoe.bpr_sort %gates{_dict_attr(sort_attrs)}"
                    f" : {t_gates} -> {t_order}")
        dispatch_operands += ", %order"
        dispatch_types += f", {t_order}"
    if runtime:
        cap_attrs = [f"k = {k} : i64", f"num_experts = {E} : i64",
                     f"tokens_per_group = {S} : i64",
                     f"max_capacity = {case['B']} : i64"]
        body.append(f"%cap = vmoe.capacity %c"
                    f"{_dict_attr(cap_attrs + _capacity_attrs(case))} : f64")
        dispatch_operands += " capacity(%cap)"
    if case["num_valid"] is not None:
        body.append(f"%valid = arith.constant {case['num_valid']} : index")
        dispatch_operands += " valid(%valid)"
    dispatch_attrs = [f"capacity_ratio = {_f64(case['C'])}"]
    body += [
        f"%buffers, %slots = vmoe.dispatch {dispatch_operands}"
        f"{_dict_attr(dispatch_attrs + _capacity_attrs(case))}",
        f"    : {dispatch_types} -> {t_buf}, {t_ids}",
    ]
    ffn_attrs = []
    if case["activation"] != "gelu_tanh":
        ffn_attrs.append(f"activation = "
                         f"#vmoe.activation<{case['activation']}>")
    body += [
        f"%y = vmoe.expert_ffn %buffers, %w1, %b1, %w2, %b2"
        f"{_dict_attr(ffn_attrs)}",
        f"    : {t_buf}, {t_w1}, {t_b1}, {t_w2}, {t_b2}",
        "%out = vmoe.combine %y, %ids, %slots, %weights",
        f"    : {t_buf}, {t_ids}, {t_ids}, {t_w} -> {t_x}",
    ]
    for value, dest, t_value, m_dest in [("ids", "ids_out", t_ids, m_ids),
                                         ("slots", "slots_out", t_ids, m_ids),
                                         ("out", "out_out", t_x, m_out)]:
        body.append(f"bufferization.materialize_in_destination %{value} in "
                    f"restrict writable %{dest} : ({t_value}, {m_dest}) -> ()")
    body.append("return")
    return _function(case, args, body)


def _function(case, args, body):
    """`@moe_case` with `args` and `body`, after a comment with the case."""
    params = ", ".join(f"{n}={case[n]}" for n in sorted(_DEFAULTS))
    params += f", seed={case['seed']}"
    sizes = f"B={case['B']}, runtime B={case['runtime_capacity']}"
    lines = [f"// vmoe_tools case {case['name']}: {params}",
             f"// {sizes}",
             "func.func @moe_case(" + ",\n    ".join(args) + ")",
             "    attributes {llvm.emit_c_interface} {"]
    lines += ["  " + line for line in body]
    lines.append("}")
    return "\n".join(lines) + "\n"
