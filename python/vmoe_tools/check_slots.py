"""Compiles vmoe.assign_slots alone and checks its three results exactly.

    cd python && /usr/bin/python3 -m vmoe_tools.check_slots \\
        --vmoe-opt ../build/bin/vmoe-opt [--target cuda --gpu-emulate]

Per case: expert ids drawn from [-1, E] (ids -1 and E are outside [0, E)
and never take a slot), a random permutation as the priority order (or
token order), a runtime capacity and num_valid passed as f64 scalars. The
function `@moe_case` is one vmoe.assign_slots writing slots, slot_entries
and fill; it is lowered, built and run as check_layers does (same options:
--target, --gpu-emulate, --workdir, --filter, ...), and the results must
equal the reference: the slots of vmoe_ref.dispatch and the slot tables they
imply (slot_entries[e, g, s] = t * k + i of the choice in slot s, else -1;
fill[e, g] = the kept choices of e). The sizes stress the GPU kernel (one
warp per group and expert, entries 32 at a time, 4 warps per block): one
group of 1,000 tokens, E above the 128 threads of a block, E not a multiple
of 4, experts overflowing, a capacity of 0, and 66,000 groups (more warps
than 65,535 blocks hold).

Exit status: 0 all pass, 1 a mismatch, 2 a tool failure.
"""

import json
import os
import shlex
import shutil
import sys
import tempfile
import zlib

import numpy as np
import torch

import vmoe_ref

from . import check_layers

# name: G, S, k, E, B, BPR order, runtime capacity (None: B), num_valid.
_CASES = [
    ("g1_s1000_e6_bpr_capacity_valid", 1, 1000, 2, 6, 200, True, 150, 913),
    ("g1_s777_e130_bpr", 1, 777, 2, 130, 9, True, None, None),
    ("g5_s64_e37_k3_token_order_valid", 5, 64, 3, 37, 4, False, 3, 250),
    ("g3_s45_e1_k1_bpr", 3, 45, 1, 1, 20, True, None, 100),
    ("g2_s40_e4_capacity0", 2, 40, 2, 4, 10, True, 0, None),
    # 66,000 blocks of 4 warps: past the 65,535 blocks of a launch.
    ("g66000_s2_e4_k1_valid", 66000, 2, 1, 4, 1, True, None, 131000),
]


def _case(name, G, S, k, E, B, bpr, capacity, valid):
    return dict(name=name, G=G, S=S, k=k, E=E, B=B, bpr=bpr,
                capacity=capacity, valid=valid)


CASES = [_case(*row) for row in _CASES]


def make_inputs(case):
    """ids [G, S, k] in [-1, E] and, with BPR, a permutation per group."""
    rng = np.random.default_rng(zlib.crc32(case["name"].encode()))
    G, S, k, E = (case[n] for n in "GSkE")
    ids = rng.integers(-1, E + 1, (G, S, k)).astype(np.int32)
    inputs = {"ids": ids}
    if case["bpr"]:
        inputs["order"] = np.stack(
            [rng.permutation(S) for _ in range(G)]).astype(np.int32)
    return inputs


def reference(case, inputs):
    """slots, slot_entries and fill of `case` (int32 numpy arrays)."""
    G, S, k, E, B = (case[n] for n in "GSkEB")
    order = inputs.get("order")
    _, slots = vmoe_ref.dispatch(
        torch.zeros(G, S, 1), torch.from_numpy(inputs["ids"]),
        None if order is None else torch.from_numpy(order), B, E,
        case["capacity"], case["valid"])
    slots = slots.numpy()
    entries = np.full((E, G, B), -1, np.int32)
    fill = np.zeros((E, G), np.int32)
    for g, t, i in np.argwhere(slots >= 0):
        e = inputs["ids"][g, t, i]
        entries[e, g, slots[g, t, i]] = t * k + i
        fill[e, g] += 1
    return {"slots": slots, "slot_entries": entries, "fill": fill}


def emit_mlir(case):
    """`@moe_case`: vmoe.assign_slots into three destination memrefs."""
    G, S, k, E, B = (case[n] for n in "GSkEB")
    t_ids, t_order = f"tensor<{G}x{S}x{k}xi32>", f"tensor<{G}x{S}xi32>"
    t_entries, t_fill = f"tensor<{E}x{G}x{B}xi32>", f"tensor<{E}x{G}xi32>"
    args = [f"%ids: {t_ids}"]
    operands, types = "%ids", t_ids
    if case["bpr"]:
        args.append(f"%order: {t_order}")
        operands += ", %order"
        types += f", {t_order}"
    body = []
    for name in ("capacity", "valid"):
        if case[name] is None:
            continue
        args.append(f"%{name}_f64: f64")
        body += [f"%{name}_i64 = arith.fptosi %{name}_f64 : f64 to i64",
                 f"%{name} = arith.index_cast %{name}_i64 : i64 to index"]
        operands += f" {name}(%{name})"
    results = [("slots", t_ids), ("slot_entries", t_entries),
               ("fill", t_fill)]
    args += [f"%{name}_out: memref{t[6:]}" for name, t in results]
    body.append(f"%slots, %slot_entries, %fill = vmoe.assign_slots "
                f"{operands} : {types} -> {t_ids}, {t_entries}, {t_fill}")
    for name, t in results:
        body.append(f"bufferization.materialize_in_destination %{name} in "
                    f"restrict writable %{name}_out : ({t}, "
                    f"memref{t[6:]}) -> ()")
    body.append("return")
    return ("func.func @moe_case(" + ", ".join(args) + ")\n"
            "    attributes {llvm.emit_c_interface} {\n"
            + "".join(f"  {line}\n" for line in body) + "}\n")


def _prepare(case, case_dir):
    """Writes the MLIR, inputs and call manifest; returns the reference."""
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir)
    inputs = make_inputs(case)
    with open(os.path.join(case_dir, "case.mlir"), "w") as f:
        f.write(emit_mlir(case))
    np.savez(os.path.join(case_dir, "inputs.npz"), **inputs)
    G, S, k, E, B = (case[n] for n in "GSkEB")
    call = {
        "library": "case.so",
        "function": "moe_case",
        "inputs": list(inputs),
        "scalars": [float(case[n]) for n in ("capacity", "valid")
                    if case[n] is not None],
        "outputs": [("slots", (G, S, k), "int32"),
                    ("slot_entries", (E, G, B), "int32"),
                    ("fill", (E, G), "int32")],
    }
    with open(os.path.join(case_dir, "call.json"), "w") as f:
        json.dump(call, f)
    return reference(case, inputs)


def _compare(ref, got):
    for key, expected in ref.items():
        wrong = np.argwhere(got[key] != expected)
        if len(wrong):
            index = tuple(int(i) for i in wrong[0])
            return (f"{key} differ at {index}: got {got[key][index]}, "
                    f"expected {expected[index]} ({len(wrong)} mismatches)")
    return None


def main(argv=None):
    args = check_layers.parse_args(argv)
    selected = [c for c in CASES if args.filter in c["name"]]
    if not selected:
        print(f"check_slots: no case matches {args.filter!r}")
        return 2
    if args.list:
        for case in selected:
            print(case["name"])
        return 0
    workdir = args.workdir or tempfile.mkdtemp(prefix="vmoe-check-slots-")
    passed = mismatched = broken = 0
    try:
        for case in selected:
            case_dir = os.path.join(workdir, case["name"])
            ref = _prepare(case, case_dir)
            try:
                got = check_layers.build_and_run(case_dir, args)
            except check_layers.ToolError as error:
                broken += 1
                print(f"ERROR {case['name']}: {error.stage} failed: "
                      f"{shlex.join(error.command)}\n"
                      f"{error.detail.rstrip()}", flush=True)
                continue
            if got is None:  # --build-only or --verify-only
                passed += 1
                print(f"BUILT {case['name']}", flush=True)
                continue
            problem = _compare(ref, got)
            kept = int((ref["slots"] >= 0).sum())
            if problem:
                mismatched += 1
                print(f"FAIL {case['name']}: {problem}", flush=True)
            else:
                passed += 1
                print(f"PASS {case['name']}: {kept} of "
                      f"{ref['slots'].size} choices kept", flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"check_slots: {len(selected)} cases, {passed} passed, "
          f"{mismatched} mismatched, {broken} tool failures")
    return 2 if broken else 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
