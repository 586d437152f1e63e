"""The Flax importer against Google's own V-MoE and ViT code (optional).

Run by check_frameworks (`vmoe`, `vit_jax`) in a Python with flax (the venv
of scripts/frameworks_venv.sh) when VMOE_SOURCE and VIT_JAX_SOURCE name
clones of github.com/google-research/vmoe and .../vision_transformer:

- vmoe: V-MoE models of vmoe.nn.vit_moe.VisionTransformerMoe with its three
  routers (the paper's NoisyTopExpertsPerItemRouter with BPR, the expert
  choice NoisyTopItemsPerExpertRouter with every block a MoE and a wider
  encoder.mlp_dim, projects/soft_moe's SoftRouter), their params saved by
  vmoe.checkpoints.partitioned.save_checkpoint (2 shards, arrays cut into
  chunks, some leaves bfloat16), imported, compiled and run: logits within
  1e-4 of the original model's. The params come from flax_layout (their
  tree must be the one the model initializes), which must also agree with
  the original (our NumPy reference of the routers, checked here against
  theirs). The routers' bfloat16 rounding is off (dispatcher.bfloat16:
  false; SoftRouter's Bfloat16Dispatcher, which it always applies,
  replaced by the f32 one: vmoe computes in f32, docs/ModelFormat.md §6).
- vit_jax: vit_jax.models_vit.VisionTransformer, whose modules today's flax
  names LayerNorm_0, MultiHeadDotProductAttention_0, LayerNorm_1,
  MlpBlock_0, saved as a flat .npz.

vmoe.checkpoints reads and writes through tensorflow.io.gfile: without
TensorFlow, a stand-in on local files (open, os.replace, ...) is used.
"""

import json
import os
import sys
import types

import numpy as np

from vmoe_tools import flax_files, flax_layout

__all__ = ["check_vmoe", "check_vit_jax"]

_DISPATCH = {"name": "einsum", "bfloat16": False}
# (model config changes, leaves saved in bfloat16)
_VMOE_CASES = {
    "token-choice-bpr": (
        {"layers": [1], "num_experts": 4, "group_size": 10,
         "router": {"num_selected_experts": 2, "dispatcher": dict(
             _DISPATCH, capacity_factor=1.0, batch_priority=True)}},
        ("head/kernel", "Encoder/encoderblock_1/Moe/Mlp/Dense_1/kernel")),
    "expert-choice-every-block": (
        {"layers": [0, 1], "num_experts": 4, "group_size": 10, "mlp_dim": 12,
         "router": {"name": "NoisyTopItemsPerExpertRouter",
                    "dispatcher": dict(_DISPATCH, capacity_factor=1.0)}},
        ("embedding/kernel",)),
    "soft": (
        {"layers": [1], "num_experts": 3, "group_size": 5,
         "router": {"name": "vmoe.projects.soft_moe.router.SoftRouter",
                    "num_slots": None, "capacity_factor": 1.0,
                    "compute_similarity_metrics": False}},
        ()),
}


def _sources():
    """Puts the vmoe and vit_jax clones first on sys.path (and a
    gfile)."""
    paths = [os.environ.get("VMOE_SOURCE"), os.environ.get("VIT_JAX_SOURCE")]
    if not all(paths) or not all(os.path.isdir(p) for p in paths):
        raise RuntimeError("VMOE_SOURCE and VIT_JAX_SOURCE must name clones "
                           "of google-research/vmoe and vision_transformer")
    # This repository's package is also called vmoe, and a regular package
    # wins over Google's namespace package: ours leaves this process's
    # path (the importer runs in its own).
    sys.path[:] = paths + [p for p in sys.path if not os.path.isfile(
        os.path.join(p or ".", "vmoe", "__init__.py"))]
    for name in [m for m in sys.modules if m == "vmoe" or
                 m.startswith("vmoe.")]:
        del sys.modules[name]
    try:
        import tensorflow.io.gfile  # pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        gfile = types.ModuleType("tensorflow.io.gfile")
        gfile.GFile = open
        gfile.exists = os.path.exists
        gfile.makedirs = lambda path: os.makedirs(path, exist_ok=True)
        gfile.rename = lambda a, b, overwrite=False: os.replace(a, b)
        gfile.stat = lambda path: types.SimpleNamespace(
            length=os.path.getsize(path))
        tensorflow = types.ModuleType("tensorflow")
        tensorflow.io = types.ModuleType("tensorflow.io")
        tensorflow.io.gfile = gfile
        sys.modules.update({"tensorflow": tensorflow,
                            "tensorflow.io": tensorflow.io,
                            "tensorflow.io.gfile": gfile})


def _config(moe):
    return {"num_classes": 3, "patch_size": [4, 4], "hidden_size": 16,
            "classifier": "token", "representation_size": None,
            "encoder": {"num_layers": 2, "mlp_dim": 32 if "mlp_dim" in moe
                        else 24, "num_heads": 2, "moe": moe}}


def _model_logits(config, params, images):
    """The original VisionTransformerMoe's logits (NHWC input)."""
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    from flax.traverse_util import flatten_dict  # pylint: disable=import-outside-toplevel
    from vmoe.nn import vit_moe  # pylint: disable=import-outside-toplevel
    model = vit_moe.VisionTransformerMoe(deterministic=True, **config)
    x = jnp.asarray(images.transpose(0, 2, 3, 1))
    shapes = jax.eval_shape(lambda: model.init(
        {"params": jax.random.PRNGKey(0), "gating": jax.random.PRNGKey(1)},
        x))["params"]
    want = {k: tuple(v.shape) for k, v in flatten_dict(shapes,
                                                       sep="/").items()}
    got = {k: tuple(v.shape) for k, v in params.items()}
    if want != got:
        raise RuntimeError(f"flax_layout's tree differs from the model's: "
                           f"{sorted(set(want.items()) ^ set(got.items()))}")
    variables = {"params": flax_files.nest({k: jnp.asarray(v)
                                  for k, v in params.items()})}
    logits, _ = model.apply(variables, x)
    return np.asarray(logits, np.float64)


def check_vmoe(args, compile_and_run, images):
    """Every _VMOE_CASES case; True when all pass."""
    _sources()
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    from vmoe import checkpoints  # pylint: disable=import-outside-toplevel
    from vmoe.projects.soft_moe import router as soft_router  # pylint: disable=import-outside-toplevel
    soft_router.Bfloat16Dispatcher = lambda dispatcher: dispatcher
    raw, x = images(1, (8, 8), count=6)
    ok = True
    for name, (moe, bf16) in _VMOE_CASES.items():
        config = _config(moe)
        for seed in range(20):
            params = flax_layout.random_params(config, (8, 8), 1, "vmoe",
                                               seed)
            for key in bf16:
                params[key] = flax_files.bf16_exact(params[key])
            ours, margin = flax_layout.evaluate(params, config, x, 2, "vmoe")
            if margin >= 1e-5:
                break
        want = _model_logits(config, params, x)
        work = os.path.join(args.work, "vmoe-" + name)
        os.makedirs(work, exist_ok=True)
        tree = flax_files.nest({k: jnp.asarray(v, jnp.bfloat16 if k in bf16 else
                                     jnp.float32)
                      for k, v in params.items()})
        prefix = os.path.join(work, "checkpoint")
        checkpoints.save_checkpoint_partitioned(
            prefix, tree, num_shards=2, max_chunk_bytes=256).get()
        with open(os.path.join(work, "config.json"), "w") as f:
            json.dump(config, f)
        got = compile_and_run(args, work, [
            "flax", prefix, "--config", os.path.join(work, "config.json")],
            raw, padding="zeros")
        diff = float(np.abs(got - want).max())
        ref = float(np.abs(ours - want).max())
        shards = len([f for f in os.listdir(work) if ".data-" in f])
        good = diff <= args.atol and ref <= args.atol
        ok &= good
        print(f"check_frameworks: vmoe {name}: {shards} shards, "
              f"max|dlogit| {diff:.2e} (flax_layout vs the original "
              f"{ref:.2e}): {'PASS' if good else 'FAIL'}", flush=True)
    return ok


def check_vit_jax(args, compile_and_run, images):
    """vit_jax's VisionTransformer with today's flax module names."""
    _sources()
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    from flax.traverse_util import flatten_dict  # pylint: disable=import-outside-toplevel
    from vit_jax import models_vit  # pylint: disable=import-outside-toplevel
    model = models_vit.VisionTransformer(
        num_classes=5, patches=types.SimpleNamespace(size=(4, 4)),
        transformer={"num_layers": 2, "mlp_dim": 24, "num_heads": 2,
                     "dropout_rate": 0.0, "attention_dropout_rate": 0.0},
        hidden_size=16, classifier="token", representation_size=None)
    raw, x = images(3, (8, 8))
    nhwc = jnp.asarray(x.transpose(0, 2, 3, 1))
    params = model.init(jax.random.PRNGKey(0), nhwc, train=False)["params"]
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    leaves = [leaf + 0.2 * jax.random.normal(k, leaf.shape)
              for leaf, k in zip(leaves, keys)]
    params = jax.tree_util.tree_unflatten(tree, leaves)
    want = np.asarray(model.apply({"params": params}, nhwc, train=False),
                      np.float64)
    flat = {k: np.asarray(v) for k, v in flatten_dict(params,
                                                      sep="/").items()}
    names = sorted(k for k in flat if k.startswith(
        "Transformer/encoderblock_0/"))
    work = os.path.join(args.work, "vit_jax")
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "vit.npz")
    np.savez(path, **flat)
    got = compile_and_run(args, work, ["flax", path], raw)
    diff = float(np.abs(got - want).max())
    modules = sorted({n.split("/")[2] for n in names})
    print(f"check_frameworks: vit_jax modules {', '.join(modules)}: "
          f"max|dlogit| {diff:.2e}: {'PASS' if diff <= args.atol else 'FAIL'}",
          flush=True)
    return diff <= args.atol
