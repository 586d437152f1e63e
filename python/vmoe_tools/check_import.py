"""Imported checkpoints, compiled, against the code that wrote them.

    cd python && /usr/bin/python3 -m vmoe_tools.check_import \\
        --vmoe-compile ../build/bin/vmoe-compile --work /tmp/ci [CASE...]

Each case writes a checkpoint in a framework's layout with our own
independent code for that layout (flax_layout: NumPy, Flax naming and
semantics incl. V-MoE's three routers; timm_layout: a PyTorch module with
timm's names) and file format (.npz; flax_files: vmoe's partitioned
.index + shards, flax msgpack), converts it with `python3 -m vmoe.importers`, compiles the
description with vmoe-compile, runs the executable on 13 random PNG images
and compares its logits with the layout's own forward pass: every logit
within 1e-4. MoE cases run with --padding=zeros, the original V-MoE
evaluation that the Flax-layout reference reproduces. Upcycling cases
compare the upcycled V-MoE with the dense model it came from (the SPEC §8
invariant: identical experts, normalized weights, nothing dropped). Random
draws whose routing margins fall below 1e-5 are rejected.

`--list` prints the cases; without CASE all run but the FORMATS ones
(checkpoint formats and routers, run by their own lit test). Exit status
0 when all pass.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

from vmoe_ref import model as vmodel
from vmoe_tools import flax_files, flax_layout
from vmoe_tools.executable import RunError, run_executable
from vmoe_tools.png import write_png
from vmoe_tools.timm_layout import TimmViT

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGES = 13


class CheckError(Exception):
    pass


def _vmoe_config(*, classes, patch, width, depth, heads, mlp_dim,
                 classifier="token", representation_size=None, moe=None):
    """A model config in the form of V-MoE's config.model."""
    config = {"name": "VisionTransformerMoe", "num_classes": classes,
              "patch_size": list(patch), "hidden_size": width,
              "classifier": classifier, "head_bias_init": 0.0,
              "encoder": {"num_layers": depth, "mlp_dim": mlp_dim,
                          "num_heads": heads, "dropout_rate": 0.0,
                          "attention_dropout_rate": 0.0}}
    if representation_size:
        config["representation_size"] = representation_size
    if moe:
        config["encoder"]["moe"] = moe
    return config


def _router(k, dispatcher):
    return {"num_selected_experts": k, "noise_std": 1.0,
            "importance_loss_weight": 0.005, "load_loss_weight": 0.005,
            "dispatcher": dict({"name": "einsum", "bfloat16": False,
                                "partition_spec": [["expert", "replica"]]},
                               **dispatcher)}


# The same written by the other routers of V-MoE (noise off at inference).
_EXPERT_CHOICE = {"name": "NoisyTopItemsPerExpertRouter", "noise_std": 1.0,
                  "dispatcher": {"name": "einsum", "bfloat16": False,
                                 "capacity_factor": 1.0,
                                 "partition_spec": [["expert", "replica"]]}}
_SOFT = {"name": "SoftRouter", "capacity_factor": 1.0, "num_slots": None,
         "partition_spec": [["expert", "replica"]],
         "compute_similarity_metrics": True}

def _last2_moe(*, classes, mlp_dim, experts, group_size, router):
    """Width 16, 2 heads, MoE in blocks 1 and 2 of 3, 4x4 patches."""
    return _vmoe_config(classes=classes, patch=(4, 4), width=16, depth=3,
                        heads=2, mlp_dim=mlp_dim,
                        moe={"layers": [1, 2], "num_experts": experts,
                             "group_size": group_size, "router": router})


# Flax cases: (scheme, config, image size, channels, scan[, file]), file
# (default: .npz) a flax_files writer and its options.
FLAX = {
    "flax-vmoe-bpr": (
        "vmoe", _vmoe_config(
            classes=5, patch=(4, 4), width=16, depth=4, heads=2, mlp_dim=24,
            representation_size=6,
            moe={"layers": [1, 3], "num_experts": 4, "group_size": 10,
                 "dropout_rate": 0.0, "split_rngs": False,
                 "router": _router(2, {"capacity_factor": 0.5,
                                       "batch_priority": True})}),
        (8, 8), 1, False),
    "flax-vmoe-map": (
        "vmoe", _vmoe_config(
            classes=4, patch=(4, 2), width=16, depth=3, heads=4, mlp_dim=24,
            classifier="map",
            moe={"layers": [0, 2], "num_experts": 3, "group_size": 12,
                 "mlp_dim": 12,
                 "router": _router(1, {"capacity": 3,
                                       "batch_priority": False})}),
        (8, 8), 3, False),
    "flax-vit_jax": (
        "vit_jax", _vmoe_config(classes=6, patch=(4, 4), width=16, depth=2,
                                heads=2, mlp_dim=20, representation_size=8),
        (8, 8), 3, False),
    "flax-big_vision-map-scan": (
        "big_vision", _vmoe_config(classes=5, patch=(4, 4), width=16,
                                   depth=3, heads=2, mlp_dim=20,
                                   classifier="map"),
        (8, 8), 1, True),
    "flax-big_vision-token": (
        "big_vision", _vmoe_config(classes=5, patch=(2, 4), width=12, depth=2,
                                   heads=3, mlp_dim=20),
        (8, 8), 1, False),
    # The released format: .index + 2 shards, bfloat16 leaves, an array cut
    # over both shards, subchunks; every block a MoE whose experts are
    # narrower than encoder.mlp_dim (which then nothing in the weights has).
    "flax-vmoe-partitioned-all-moe": (
        "vmoe", _vmoe_config(
            classes=5, patch=(4, 4), width=16, depth=2, heads=2, mlp_dim=64,
            moe={"layers": [0, 1], "num_experts": 4, "group_size": 10,
                 "mlp_dim": 12,
                 "router": _router(2, {"capacity_factor": 1.0,
                                       "batch_priority": True})}),
        (8, 8), 1, False,
        ("partitioned", {"shards": 2, "subchunk": 7, "split": (
            "Encoder/encoderblock_0/Moe/Mlp/Dense_0/kernel",),
            "bf16": ("Encoder/encoderblock_1/Moe/Mlp/Dense_1/kernel",
                     "embedding/kernel", "head/bias")})),
    # Expert choice (ceil, multiple of 4: B = 4 of 10 tokens), as a flax
    # msgpack training state with a chunked array.
    "flax-vmoe-expert-choice-msgpack": (
        "vmoe", _last2_moe(classes=4, mlp_dim=24, experts=4, group_size=10,
                           router=_EXPERT_CHOICE),
        (8, 8), 1, False,
        ("msgpack", {"chunked": ("Encoder/encoderblock_1/Moe/Mlp/Dense_0/"
                                 "kernel",)})),
    # Soft MoE (2 slots per expert: round(5 / 3)), one image per group, in
    # the partitioned format before 2022-06-22 (no version), 3 shards.
    "flax-vmoe-soft-unversioned": (
        "vmoe", _last2_moe(classes=3, mlp_dim=20, experts=3, group_size=5,
                           router=_SOFT),
        (8, 8), 1, False,
        ("partitioned", {"shards": 3, "version": False})),
}

# timm cases: (TimmViT arguments, importer options, file suffix, dtype).
_TIMM_BASE = {"image_size": (8, 8), "patch": (4, 4), "channels": 3,
              "dim": 16, "depth": 2, "heads": 2, "hidden": 24, "classes": 5}
TIMM = {
    "timm-token-pth": (
        dict(_TIMM_BASE, representation_size=7), [], ".pth", "F32"),
    "timm-avg-fcnorm-bf16": (
        dict(_TIMM_BASE, class_token=False, global_pool="avg", fc_norm=True,
             layer_scale=True, eps=1e-5, gelu="tanh"),
        ["--layer-norm-epsilon", "1e-5", "--mlp-activation", "gelu_tanh"],
        ".safetensors", "BF16"),
    "timm-map": (
        dict(_TIMM_BASE, class_token=False, global_pool="map", channels=1),
        [], ".safetensors", "F32"),
    "timm-no-embed-class": (
        dict(_TIMM_BASE, image_size=(8, 12), no_embed_class=True,
             qkv_bias=False),
        ["--image-size", "8x12"], ".safetensors", "F32"),
}

# Upcycling cases: (source case, spec, noise expected to matter).
UPCYCLE = {
    "upcycle-timm-every-2": ("timm-token-pth",
                             "experts=4,k=2,placement=every-2", False),
    "upcycle-flax-last-1-router": (
        "flax-vit_jax", "experts=3,k=1,placement=last-1,router=normal,"
        "router_std=1,routing=vanilla,group_size=2", False),
    "upcycle-timm-noise": ("timm-token-pth",
                           "experts=4,k=2,placement=every-2,noise=0.05,"
                           "seed=3", True),
}

CASES = list(FLAX) + list(TIMM) + list(UPCYCLE)
# Checkpoint formats and routers of the Flax importer: run when named
# (test/Integration/CPU/importers-flax-formats.test), not by default.
FORMATS = ["flax-vmoe-partitioned-all-moe", "flax-vmoe-expert-choice-msgpack",
           "flax-vmoe-soft-unversioned"]
DEFAULT = [case for case in CASES if case not in FORMATS]


def _images(channels, size, seed=7):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (IMAGES, channels) + tuple(size),
                        dtype=np.uint8)


def _write_images(folder, images):
    os.makedirs(folder, exist_ok=True)
    names = []
    for i, image in enumerate(images):
        name = f"{i:04d}.png"
        write_png(os.path.join(folder, name),
                  image[0] if image.shape[0] == 1 else image.transpose(1, 2,
                                                                       0))
        names.append(name)
    with open(os.path.join(folder, "list.txt"), "w") as f:
        f.write("".join(n + "\n" for n in names))
    return os.path.join(folder, "list.txt")


def _normalize(images):
    """p/255 - 0.5 over 0.5 in float32, as the runtime (mean = std = 0.5,
    the importers' default)."""
    x = images.astype(np.float32) / np.float32(255.0)
    return (x - np.float32(0.5)) / np.float32(0.5)


def _save_safetensors(path, tensors, dtype):
    """Writes F32, or BF16 (values must be bf16-exact), safetensors."""
    import struct
    header, blobs, offset = {}, [], 0
    for name, value in tensors.items():
        value = np.ascontiguousarray(value, dtype="<f4")
        data = (value.view("<u4") >> 16).astype("<u2").tobytes() \
            if dtype == "BF16" else value.tobytes()
        header[name] = {"dtype": dtype, "shape": list(value.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def _flax_checkpoint(case, work, seed):
    """(checkpoint, config path, reference fn, padding, desc check)."""
    scheme, config, size, channels, scan, *file = FLAX[case]
    kind, options = file[0] if file else ("npz", {})
    images = _normalize(_images(channels, size))
    moe = config["encoder"].get("moe")
    tokens = (size[0] // config["patch_size"][0]) * (
        size[1] // config["patch_size"][1]) + (
        config["classifier"] == "token")
    batch = 1
    if moe:
        g = moe["group_size"]
        batch = np.lcm(g, tokens) // tokens
    for draw in range(seed, seed + 50):
        params = flax_layout.random_params(config, size, channels, scheme,
                                           draw, scan)
        for key in options.get("bf16", ()):
            params[key] = flax_files.bf16_exact(params[key])
        ref, margin = flax_layout.evaluate(params, config, images, batch,
                                           scheme)
        if margin >= 1e-5:
            break
    else:
        raise CheckError(f"{case}: no draw with routing margins >= 1e-5")
    if kind == "partitioned":
        path = os.path.join(work, "checkpoint")
        flax_files.write_partitioned(path, params, **options)
    elif kind == "msgpack":
        path = os.path.join(work, "checkpoint_1000")
        flax_files.write_msgpack(path, params, **options)
    else:
        path = os.path.join(work, "checkpoint.npz")
        np.savez(path, **params)
    config_path = os.path.join(work, "config.json")
    with open(config_path, "w") as f:
        json.dump(config, f, indent=1)
    args = ["flax", path, "--config", config_path]
    grid = (size[0] // config["patch_size"][0],
            size[1] // config["patch_size"][1])
    if grid[0] != grid[1]:
        args += ["--image-size", f"{size[0]}x{size[1]}"]
    return args, images, ref, "zeros" if moe else "masked"


def _timm_model(case, seed):
    kwargs, options, suffix, dtype = TIMM[case]
    net = TimmViT(**kwargs).randomize(seed).eval()
    if dtype == "BF16":
        with torch.no_grad():
            for param in net.parameters():
                param.copy_(param.bfloat16().float())
    return net, options, suffix, dtype


def _timm_checkpoint(case, work, seed):
    net, options, suffix, dtype = _timm_model(case, seed)
    state = {k: v.detach().clone() for k, v in net.state_dict().items()}
    path = os.path.join(work, "checkpoint" + suffix)
    if suffix == ".pth":
        torch.save(state, path)
    else:
        _save_safetensors(path, {k: v.numpy() for k, v in state.items()},
                          dtype)
    kwargs = TIMM[case][0]
    images = _normalize(_images(kwargs["channels"], kwargs["image_size"]))
    with torch.no_grad():
        ref = net(torch.from_numpy(images)).double().numpy()
    # The PNGs have the model's size and are compared unresized: not
    # timm's evaluation transform, which would resize and crop them.
    args = ["timm", path, "--heads", str(kwargs["heads"]), "--preprocess",
            "decode"] + options
    return args, images, ref, "masked"


def _checkpoint(case, work, seed):
    if case in FLAX:
        return _flax_checkpoint(case, work, seed)
    return _timm_checkpoint(case, work, seed)


def _run(command, what):
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=600,
                          env=dict(os.environ, PYTHONPATH=PYTHON_DIR))
    if done.returncode != 0:
        raise CheckError(f"{what} exited with {done.returncode}: "
                         f"{(done.stderr or done.stdout).strip()}")
    return done.stdout


def check_case(case, args):
    work = os.path.join(args.work, case)
    os.makedirs(work, exist_ok=True)
    source, spec, noisy = UPCYCLE.get(case, (case, None, False))
    importer, images, ref, padding = _checkpoint(source, work, args.seed)
    prefix = os.path.join(work, "model")
    command = [sys.executable, "-m", "vmoe.importers"] + importer[:2] + [
        "-o", prefix] + importer[2:]
    if spec:
        command += ["--upcycle", spec]
    print(_run(command, "vmoe.importers").strip())
    exe = os.path.join(work, "model.exe")
    _run([args.vmoe_compile, prefix + ".json", "-o", exe], "vmoe-compile")
    raw = _images(images.shape[1], images.shape[2:])
    image_list = _write_images(os.path.join(work, "images"), raw)
    got, stats = run_executable(exe, prefix + ".safetensors", image_list,
                                padding=padding)
    with open(prefix + ".json") as f:
        desc = json.load(f)
    notes = []
    if noisy:
        # Experts with noise differ: the logits leave the dense ones, and
        # the compiled model still computes what vmoe_ref computes.
        moved = float(np.abs(got - ref).max())
        net = vmodel.load_model(prefix + ".json", prefix + ".safetensors")
        want, _ = vmodel.evaluate(net, raw)
        diff = float(np.abs(got - want).max())
        ok = diff <= args.atol and moved > 1e-3
        notes.append(f"vs vmoe_ref {diff:.2e}, vs dense {moved:.2e}")
    else:
        diff = float(np.abs(got - ref).max())
        ok = diff <= args.atol and got.shape == ref.shape
        notes.append(f"max|dlogit| {diff:.2e}")
    if stats:
        dropped = sum(row[-1] for row in stats.values())
        notes.append(f"dropped {dropped}")
        if spec:
            ok = ok and (noisy or dropped == 0)
    notes.append(f"head {desc['head']}, final_norm "
                 f"{desc.get('final_norm', 'tokens')}, eps "
                 f"{desc['layer_norm_epsilon']:g}, {desc['mlp_activation']}")
    print(f"check_import: {case}: {'; '.join(notes)}: "
          f"{'PASS' if ok else 'FAIL'}", flush=True)
    return ok


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*",
                        help="default: all but the FORMATS cases")
    parser.add_argument("--vmoe-compile")
    parser.add_argument("--work")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(CASES))
        return 0
    if not args.vmoe_compile or not args.work:
        parser.error("--vmoe-compile and --work are required")
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r} (see --list)")
    failed = 0
    for case in args.cases or DEFAULT:
        try:
            failed += not check_case(case, args)
        except (CheckError, RunError, OSError, ValueError,
                subprocess.TimeoutExpired) as err:
            print(f"check_import: {case}: error: {err}: FAIL", flush=True)
            failed += 1
    total = len(args.cases or DEFAULT)
    print(f"check_import: {total} cases, {total - failed} pass, "
          f"{failed} fail")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
