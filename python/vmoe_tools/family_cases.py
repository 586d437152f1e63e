"""Layer cases of expert choice routing and Soft MoE (SPEC §8).

The part of the case matrix (vmoe_tools.cases) for `routing` =
"expert_choice" and "soft": the cases themselves, their inputs, the PyTorch
reference and the MLIR of `@moe_case`. cases.py dispatches here for these
routings; the case dicts share its defaults (G, S, D, H, E, C, capacity
rule, multiple_of, activation, runtime_ratio) plus `P` (Soft MoE slots per
expert, None: round(S/E)).

Expert choice inputs are coarse like the token choice ones (logits exact in
f32) and are redrawn while two different gates in one expert's column are
within 1e-5 relative, unless the two tokens' max-centred logit rows are
equal (then the gates are bit-identical everywhere and exercise the tie
rule). Soft MoE has no discrete decision: its inputs are random normals and
a random positive scale.
"""

import numpy as np
import torch

import vmoe_ref

EXPERT_CHOICE, SOFT = "expert_choice", "soft"
ROUTINGS = (EXPERT_CHOICE, SOFT)

_SEPARATION = 1e-5


def size(case):
    """Fills in B (expert choice: rule(S*C/E)) or P (Soft MoE)."""
    if case["routing"] == EXPERT_CHOICE:
        case["B"] = vmoe_ref.sized_capacity(
            1, case["S"], case["C"], case["E"], case["capacity_rule"],
            case["multiple_of"])
        case["runtime_capacity"] = None
        if case["runtime_ratio"] is not None:
            case["runtime_capacity"] = vmoe_ref.runtime_capacity(
                1, case["S"], case["runtime_ratio"], case["E"], case["B"],
                case["capacity_rule"], case["multiple_of"])
    else:
        if case["P"] is None:
            case["P"] = vmoe_ref.default_slots(case["S"], case["E"])
        if case["P"] < 1:
            raise ValueError(f"{case['name']}: P rounds to 0")
        case["B"] = case["P"]
        case["runtime_capacity"] = None


def matrix(make):
    """The expert choice and Soft MoE cases; `make(name, **params)` is
    cases._case. Trailing comments give B (expert choice) or P and J = E*P
    (Soft MoE)."""
    ec, soft = EXPERT_CHOICE, SOFT
    return [
        # Expert choice: C from 0.1 to E; G = 1, 3; E = 1, 4, 32.
        make("ec_c1_e4", routing=ec, C=1.0),                   # B 8 (7.5)
        make("ec_c2_e4_g3", routing=ec, G=3, H=32, C=2.0),     # B 15
        make("ec_c0.5_g3", routing=ec, G=3, S=45, C=0.5),      # B 6 (5.6)
        make("ec_c2_e32", routing=ec, S=50, D=36, H=40, E=32, C=2.0),  # 3
        make("ec_e1_g3", routing=ec, G=3, S=21, D=12, H=16, E=1,
             C=0.5),                                           # B 10
        # B = 1; every expert takes every token (C = E, the k = E of expert
        # choice); B above S (capped at S).
        make("ec_b1_e32_g3", routing=ec, G=3, S=30, E=32, C=1.0),  # 1
        make("ec_all_tokens_c4", routing=ec, S=30, C=4.0),     # B 30
        make("ec_b_above_s_c6_g3", routing=ec, G=3, S=20, C=6.0),  # 30
        make("ec_ceil_multiple4", routing=ec, S=37, E=4, C=1.0,
             capacity_rule="ceil", multiple_of=4),             # 10 -> 12
        # Exact ties: duplicated tokens and two experts with one column.
        make("ec_ties_g3", routing=ec, G=3, S=40, C=1.0, pattern="ties"),
        make("ec_ties_c0.5", routing=ec, S=40, C=0.5, pattern="ties"),
        make("ec_one_expert_g3", routing=ec, G=3, C=1.0,
             pattern="one_expert"),
        # Runtime capacity below, at 0 and above the compiled maximum.
        make("ec_runtime_c0.5_g3", routing=ec, G=3, S=50, C=2.0,
             runtime_ratio=0.5),                               # 25, 6
        make("ec_runtime_zero", routing=ec, C=1.0, runtime_ratio=0.0),
        make("ec_runtime_above_max", routing=ec, C=1.0, runtime_ratio=4.0),
        make("ec_runtime_ceil_multiple4", routing=ec, S=50, C=1.05,
             capacity_rule="ceil", multiple_of=4, runtime_ratio=0.25),
        # Activations, static sizes off the vector width, big k blocks.
        make("ec_act_relu", routing=ec, activation="relu"),
        make("ec_act_silu_g3", routing=ec, G=3, activation="silu"),
        make("ec_odd_sizes", routing=ec, S=37, D=13, H=19, C=1.5),  # 14
        make("ec_wide", routing=ec, S=20, D=520, H=530, C=1.0),  # B 5
        # Soft MoE: P = 1, the default round(S/E), P*E > S, G > 1.
        make("soft_default_p", routing=soft),                  # P 8 (7.5)
        make("soft_p1_g3", routing=soft, G=3, P=1),            # J 4
        make("soft_pe_above_s_g3", routing=soft, G=3, S=5, D=10, H=32,
             E=8, P=1),                                        # J 8 > 5
        make("soft_pe_above_s_scale_x", routing=soft, S=5, D=10, H=32,
             E=8, P=2),                                        # scale on x
        make("soft_e32_p2", routing=soft, S=50, D=36, H=40, E=32, P=2),
        make("soft_e1_p4_g3", routing=soft, G=3, S=21, D=12, H=16, E=1,
             P=4),
        make("soft_odd_sizes_g3", routing=soft, G=3, S=37, D=13, H=19, P=3),
        make("soft_act_gelu_erf", routing=soft, P=2, activation="gelu_erf"),
        make("soft_act_silu", routing=soft, P=2, activation="silu"),
        # Past a block of k (512 rows, Microkernel.cpp) in every GEMM: D
        # (logits), S (dispatch), J = E * P (combine), H (experts).
        make("soft_wide", routing=soft, G=2, S=20, D=520, H=530, E=4, P=2),
        make("soft_long", routing=soft, S=540, D=12, H=16, E=17, P=31),
    ]


# ----------------------------------------------------------------- inputs

def draw(case, rng, coarse_draw):
    """One draw of inputs; expert choice reuses the coarse token choice
    draw (`coarse_draw(case, rng)`), Soft MoE draws normals."""
    if case["routing"] == EXPERT_CHOICE:
        return coarse_draw(case, rng)
    G, S, D, H, E, P = (case[n] for n in "GSDHEP")

    def normal(*shape, scale=1.0):
        return rng.standard_normal(shape) * scale

    arrays = dict(x=normal(G, S, D), phi=normal(D, E, P),
                  scale=np.array(rng.uniform(0.5, 2.0)),
                  w1=normal(E, D, H, scale=0.1), b1=normal(E, H, scale=0.1),
                  w2=normal(E, H, D, scale=0.1), b2=normal(E, D, scale=0.1))
    return {name: np.ascontiguousarray(a, dtype=np.float32)
            for name, a in arrays.items()}


def robust(case, inputs):
    """Expert choice: whether each expert's ranking of tokens is immune to
    last-ulp differences (see the module docstring). Soft MoE: always."""
    if case["routing"] != EXPERT_CHOICE:
        return True
    logits = inputs["x"].astype(np.float64) @ inputs["router"].astype(
        np.float64)
    centred = logits - logits.max(-1, keepdims=True)
    gates = np.exp(centred)
    gates /= gates.sum(-1, keepdims=True)
    for g in range(case["G"]):
        for e in range(case["E"]):
            column = gates[g, :, e]
            tokens = np.argsort(-column, kind="stable")
            for a, b in zip(tokens[:-1], tokens[1:]):
                close = abs(column[a] - column[b]) <= _SEPARATION * max(
                    column[a], column[b])
                if close and not np.array_equal(centred[g, a],
                                                centred[g, b]):
                    return False
    return True


def input_names(case):
    """The input memrefs of `@moe_case`, in order."""
    if case["routing"] == EXPERT_CHOICE:
        return ("x", "router", "w1", "b1", "w2", "b2")
    return ("x", "phi", "scale", "w1", "b1", "w2", "b2")


# -------------------------------------------------------------- reference

def _run(case, inputs, dtype):
    t = {name: torch.from_numpy(a).to(dtype) for name, a in inputs.items()}
    if case["routing"] == EXPERT_CHOICE:
        return vmoe_ref.expert_choice_layer(
            t["x"], t["router"], t["w1"], t["b1"], t["w2"], t["b2"],
            num_experts=case["E"], capacity_ratio=case["C"],
            capacity_rule=case["capacity_rule"],
            multiple_of=case["multiple_of"], activation=case["activation"],
            runtime_capacity=case["runtime_capacity"])
    return vmoe_ref.soft_moe(t["x"], t["phi"], t["scale"], t["w1"], t["b1"],
                             t["w2"], t["b2"], case["activation"])


def reference(case, inputs):
    """Expected outputs: the routing (expert choice: token_ids, slots) of
    the float32 reference, which must equal the float64 one, and `out` in
    float64 from the same float32 inputs. `dropped` counts the tokens taken
    by no expert (0 for Soft MoE)."""
    single = _run(case, inputs, torch.float32)
    double = _run(case, inputs, torch.float64)
    ref = {"out": double["out"].numpy()}
    if case["routing"] == EXPERT_CHOICE:
        for key in ("token_ids", "slots"):
            if not torch.equal(single[key], double[key]):
                raise RuntimeError(f"{case['name']}: {key} depend on "
                                   "precision")
            ref[key] = single[key].numpy()
        assert single["B"] == case["B"]
        ref["dropped"] = vmoe_ref.expert_choice_stats(
            single["slots"])["untaken"]
        ref["choices"] = case["G"] * case["S"]
    else:
        ref["dropped"], ref["choices"] = 0, case["G"] * case["S"]
    return ref


# -------------------------------------------------------------------- MLIR

def output_specs(case):
    """(name, shape, numpy dtype) of the destination memrefs, in order."""
    G, S, D, E = case["G"], case["S"], case["D"], case["E"]
    out = [("out", (G, S, D), np.float32)]
    if case["routing"] == EXPERT_CHOICE:
        return [("token_ids", (E, G, case["B"]), np.int32),
                ("slots", (G, S, E), np.int32)] + out
    return out


def _tensor(shape, element="f32"):
    return "tensor<" + "x".join(str(n) for n in shape) + f"x{element}>"


def _memref(shape, element="f32"):
    return "memref<" + "x".join(str(n) for n in shape) + f"x{element}>"


def emit_body(case, dict_attr, capacity_attrs):
    """(arguments, body lines) of `@moe_case`; dict_attr and
    capacity_attrs are the attribute helpers of cases.py."""
    G, S, D, H, E = (case[n] for n in "GSDHE")
    t_x, t_w1, t_b1 = _tensor((G, S, D)), _tensor((E, D, H)), _tensor((E, H))
    t_w2, t_b2 = _tensor((E, H, D)), _tensor((E, D))
    ffn_attrs = []
    if case["activation"] != "gelu_tanh":
        ffn_attrs.append(f"activation = "
                         f"#vmoe.activation<{case['activation']}>")
    weights = f"{t_w1}, {t_b1}, {t_w2}, {t_b2}"
    weight_args = [f"%w1: {t_w1}", f"%b1: {t_b1}", f"%w2: {t_w2}",
                   f"%b2: {t_b2}"]
    if case["routing"] == EXPERT_CHOICE:
        t_router, t_gates = _tensor((D, E)), _tensor((G, S, E))
        t_tokens = _tensor((E, G, case["B"]), "i32")
        t_slots = _tensor((G, S, E), "i32")
        args = [f"%x: {t_x}", f"%router: {t_router}", *weight_args]
        capacity, body = "", []
        if case["runtime_ratio"] is not None:
            args.append("%c: f64")
            attrs = ["k = 1 : i64", f"num_experts = {E} : i64",
                     f"tokens_per_group = {S} : i64",
                     f"max_capacity = {case['B']} : i64"]
            body.append(f"%cap = vmoe.capacity %c"
                        f"{dict_attr(attrs + capacity_attrs(case))} : f64")
            capacity = " capacity(%cap)"
        body += [
            f"%gates, %token_ids, %slots = vmoe.expert_choice %x, %router"
            f"{capacity}",
            f"    : {t_x}, {t_router} -> {t_gates}, {t_tokens}, {t_slots}",
            f"%out = vmoe.expert_choice_experts %x, %gates, %token_ids, "
            f"%slots, %w1, %b1, %w2, %b2{dict_attr(ffn_attrs)}",
            f"    : {t_x}, {t_gates}, {t_tokens}, {t_slots}, {weights}",
        ]
        results = [("token_ids", t_tokens), ("slots", t_slots)]
    else:
        t_phi = _tensor((D, E, case["P"]))
        args = [f"%x: {t_x}", f"%phi: {t_phi}", "%scale: tensor<f32>",
                *weight_args]
        body = [
            f"%out = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2"
            f"{dict_attr(ffn_attrs)}",
            f"    : {t_x}, {t_phi}, tensor<f32>, {weights}",
        ]
        results = []
    results.append(("out", t_x))
    for name, shape, dtype in output_specs(case):
        element = "i32" if dtype == np.int32 else "f32"
        args.append(f"%{name}_out: {_memref(shape, element)}")
    types = dict(results)
    for name, shape, dtype in output_specs(case):
        element = "i32" if dtype == np.int32 else "f32"
        body.append(f"bufferization.materialize_in_destination %{name} in "
                    f"restrict writable %{name}_out : ({types[name]}, "
                    f"{_memref(shape, element)}) -> ()")
    body.append("return")
    return args, body
