"""Checkpoints written by the real timm and Flax libraries, imported.

    VENV/bin/python -m vmoe_tools.check_frameworks \\
        --vmoe-compile ../build/bin/vmoe-compile --work /tmp/cf \\
        [timm] [flax] [vit_jax] [vmoe]

Optional (never required by CI): needs a Python with timm (and torch) or
flax (and jax), e.g. the venvs of scripts/frameworks_venv.sh; lit runs it
when VMOE_TIMM_PYTHON / VMOE_FLAX_PYTHON name such Pythons (features
`timm`, `flax`; `vmoe-source` when VMOE_SOURCE and VIT_JAX_SOURCE also
name clones of Google's vmoe and vision_transformer) and reports it
UNSUPPORTED otherwise.

timm: small VisionTransformers built by timm itself (class token, avg pool
with fc_norm, attention pooling), every parameter redrawn, saved with
torch.save and safetensors.torch; flax: a small ViT written with
flax.linen in V-MoE's module names (embedding Conv, Encoder/encoderblock_i
with LayerNorm, MultiHeadDotProductAttention, Mlp; encoder_norm, head),
initialized by Flax, flattened to a '/'-joined .npz and saved by
flax.serialization.to_bytes in float32 and bfloat16; vit_jax and vmoe:
Google's own models and checkpoint writer (framework_vmoe.py). Each is
imported, compiled and run on random PNGs; the logits must match the
library's own forward pass within 1e-4.
"""

import argparse
import os
import subprocess
import sys

import numpy as np

from vmoe_tools import framework_vmoe
from vmoe_tools.executable import run_executable
from vmoe_tools.png import write_png

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _images(channels, size, count=5, seed=3):
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (count, channels) + size, dtype=np.uint8)
    x = raw.astype(np.float32) / np.float32(255.0)
    return raw, (x - np.float32(0.5)) / np.float32(0.5)


def _compile_and_run(args, work, importer_args, raw, padding=None):
    prefix = os.path.join(work, "model")
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    for command in ([sys.executable, "-m", "vmoe.importers"] +
                    importer_args + ["-o", prefix],
                    [args.vmoe_compile, prefix + ".json", "-o",
                     prefix + ".exe"]):
        done = subprocess.run(command, capture_output=True, text=True,
                              env=env, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip() or done.stdout.strip())
    folder = os.path.join(work, "images")
    os.makedirs(folder, exist_ok=True)
    names = []
    for i, image in enumerate(raw):
        names.append(f"{i}.png")
        write_png(os.path.join(folder, names[-1]), image.transpose(1, 2, 0)
                  if image.shape[0] == 3 else image[0])
    with open(os.path.join(folder, "list.txt"), "w") as f:
        f.write("".join(n + "\n" for n in names))
    logits, _ = run_executable(prefix + ".exe", prefix + ".safetensors",
                               os.path.join(folder, "list.txt"),
                               padding=padding)
    return logits


def check_timm(args):
    import timm  # pylint: disable=import-outside-toplevel
    import torch  # pylint: disable=import-outside-toplevel
    from safetensors.torch import save_file  # pylint: disable=import-outside-toplevel
    from timm.models.vision_transformer import VisionTransformer
    variants = {
        "token": dict(global_pool="token"),
        "avg-fc-norm": dict(global_pool="avg", class_token=False,
                            fc_norm=True),
        "map": dict(global_pool="map", class_token=False),
    }
    ok = True
    for name, extra in variants.items():
        torch.manual_seed(0)
        net = VisionTransformer(img_size=16, patch_size=8, in_chans=3,
                                num_classes=5, embed_dim=32, depth=2,
                                num_heads=4, mlp_ratio=2.0, **extra).eval()
        with torch.no_grad():
            for pname, param in net.named_parameters():
                noise = torch.randn(param.shape)
                if "norm" in pname and pname.endswith("weight"):
                    param.copy_(1 + 0.1 * noise)
                elif param.dim() >= 2:
                    param.copy_(noise / param[0].numel() ** 0.5)
                else:
                    param.copy_(0.1 * noise)
        work = os.path.join(args.work, "timm-" + name)
        os.makedirs(work, exist_ok=True)
        raw, x = _images(3, (16, 16))
        with torch.no_grad():
            want = net(torch.from_numpy(x)).double().numpy()
        for suffix in (".pth", ".safetensors"):
            path = os.path.join(work, "vit" + suffix)
            state = {k: v.contiguous() for k, v in net.state_dict().items()}
            if suffix == ".pth":
                torch.save(state, path)
            else:
                save_file(state, path)
            # The images have the model's size and stay so: not timm's
            # evaluation transform (resize and crop).
            got = _compile_and_run(args, work, ["timm", path, "--heads", "4",
                                                "--preprocess", "decode"],
                                   raw)
            diff = float(np.abs(got - want).max())
            ok &= diff <= args.atol
            print(f"check_frameworks: timm {timm.__version__} {name} "
                  f"{suffix}: max|dlogit| {diff:.2e}: "
                  f"{'PASS' if diff <= args.atol else 'FAIL'}", flush=True)
    return ok


def check_flax(args):
    import flax  # pylint: disable=import-outside-toplevel
    import flax.linen as nn  # pylint: disable=import-outside-toplevel
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    from flax import serialization  # pylint: disable=import-outside-toplevel
    from flax.traverse_util import flatten_dict, unflatten_dict  # pylint: disable=import-outside-toplevel

    class Mlp(nn.Module):
        @nn.compact
        def __call__(self, x):
            y = nn.gelu(nn.Dense(48, name="Dense_0")(x))
            return nn.Dense(x.shape[-1], name="Dense_1")(y)

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            y = nn.LayerNorm(name="LayerNorm_0")(x)
            x = x + nn.MultiHeadDotProductAttention(
                num_heads=4, name="SelfAttention")(y, y)
            return x + Mlp(name="Mlp")(nn.LayerNorm(name="LayerNorm_1")(x))

    class Encoder(nn.Module):
        @nn.compact
        def __call__(self, x):
            pos = self.param("pos_embedding", nn.initializers.normal(0.5),
                             (1,) + x.shape[1:])
            x = x + pos
            for i in range(2):
                x = Block(name=f"encoderblock_{i}")(x)
            return nn.LayerNorm(name="encoder_norm")(x)

    class ViT(nn.Module):
        @nn.compact
        def __call__(self, images):
            x = nn.Conv(32, (8, 8), strides=(8, 8), padding="VALID",
                        name="embedding")(images)
            x = x.reshape(x.shape[0], -1, x.shape[-1])
            cls = self.param("cls", nn.initializers.normal(0.5),
                             (1, 1, 32))
            x = jnp.concatenate([jnp.tile(cls, (x.shape[0], 1, 1)), x], 1)
            x = Encoder(name="Encoder")(x)
            return nn.Dense(5, name="head")(x[:, 0])

    raw, x = _images(3, (16, 16))
    nhwc = jnp.asarray(x.transpose(0, 2, 3, 1))
    model = ViT()
    params = model.init(jax.random.PRNGKey(0), nhwc)["params"]
    # Randomize every leaf so that each one matters (biases are 0 at init).
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    leaves = [leaf + 0.1 * jax.random.normal(k, leaf.shape)
              for leaf, k in zip(leaves, keys)]
    params = jax.tree_util.tree_unflatten(tree, leaves)
    want = np.asarray(model.apply({"params": params}, nhwc), np.float64)
    flat = flatten_dict(params, sep="/")
    # V-MoE keeps the position embedding under Encoder/posembed_input.
    flat = {("Encoder/posembed_input/pos_embedding"
             if k == "Encoder/pos_embedding" else k): np.asarray(v)
            for k, v in flat.items()}
    work = os.path.join(args.work, "flax")
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "vit.npz")
    np.savez(path, **flat)
    ok = _report(f"flax {flax.__version__} vit .npz", want,
                 _compile_and_run(args, work, ["flax", path], raw), args)
    # flax.serialization.to_bytes of the variables, f32 and bfloat16.
    tree = unflatten_dict({tuple(k.split("/")): v for k, v in flat.items()})
    for dtype in (jnp.float32, jnp.bfloat16):
        cast = jax.tree_util.tree_map(lambda v, t=dtype: jnp.asarray(v, t),
                                      tree)
        path = os.path.join(work, f"checkpoint_{jnp.dtype(dtype).name}")
        with open(path, "wb") as f:
            f.write(serialization.to_bytes({"params": cast}))
        exact = _flax_vit_logits(model, cast, nhwc)
        ok &= _report(f"flax {flax.__version__} vit to_bytes "
                      f"{jnp.dtype(dtype).name}", exact,
                      _compile_and_run(args, work, ["flax", path], raw),
                      args)
    return ok


def _flax_vit_logits(model, tree, nhwc):
    """The model's logits on `tree` (V-MoE's names) widened to f32."""
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    params = jax.tree_util.tree_map(lambda v: jnp.asarray(v, jnp.float32),
                                    tree)
    encoder = dict(params["Encoder"])
    encoder["pos_embedding"] = encoder.pop("posembed_input")["pos_embedding"]
    params = dict(params, Encoder=encoder)
    return np.asarray(model.apply({"params": params}, nhwc), np.float64)


def _report(what, want, got, args):
    diff = float(np.abs(got - want).max())
    print(f"check_frameworks: {what}: max|dlogit| {diff:.2e}: "
          f"{'PASS' if diff <= args.atol else 'FAIL'}", flush=True)
    return diff <= args.atol


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("frameworks", nargs="*", default=["timm", "flax"],
                        help="timm, flax, vit_jax, vmoe (the last two: "
                             "VMOE_SOURCE, VIT_JAX_SOURCE)")
    parser.add_argument("--vmoe-compile", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--atol", type=float, default=1e-4)
    args = parser.parse_args(argv)
    checks = {"timm": check_timm, "flax": check_flax,
              "vit_jax": lambda a: framework_vmoe.check_vit_jax(
                  a, _compile_and_run, _images),
              "vmoe": lambda a: framework_vmoe.check_vmoe(
                  a, _compile_and_run, _images)}
    ok = True
    for name in args.frameworks:
        try:
            ok &= checks[name](args)
        except (ImportError, RuntimeError, ValueError, OSError) as err:
            print(f"check_frameworks: {name}: error: {err}: FAIL")
            ok = False
    print(f"check_frameworks: {'all pass' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
