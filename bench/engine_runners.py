"""One row of bench/engine_peers.py in a fresh process: one engine, one
thread count, one batch. Loads the engine on the exported model, computes
the logits of every image and checks them against vmoe's before timing,
then times `--repeats` passes over all images and prints one JSON line.
With `--profile N`, instead times N passes with the engine's own per-op
profiler and prints the time per op type (OpenVINO, ONNX Runtime).

Run by the engines' Python (scripts/engine_peers.sh: numpy and the
engines, no torch) for onnxruntime, openvino, openvino-bf16 and iree, and
by /usr/bin/python3 (Debian's torch) for `torch`, the same static-shape
model (bench/onnx_vmoe.py) in PyTorch eager. An engine that cannot be
imported or loaded, or whose logits are off, ends the process with one line
on stderr (engine_runners: ...) and status 1, or 3 when the logits are
off.
"""

import argparse
import collections
import json
import os
import sys
import time

import numpy as np

ENGINES = ("onnxruntime", "openvino", "openvino-bf16", "iree", "torch")


CHECK_FAILED = 3  # exit status when the logits are off (else 1)


def fail(message, status=1):
    print(f"engine_runners: {message}", file=sys.stderr, flush=True)
    raise SystemExit(status)


def _import(module):
    try:
        return __import__(module, fromlist=["_"])
    except Exception as err:  # missing package, broken native library
        fail(f"cannot import {module}: {type(err).__name__}: {err}")


def load_onnxruntime(args):
    """ONNX Runtime, CPU provider: intra-op threads = --threads, one
    inter-op thread, sequential execution, every graph optimization."""
    ort = _import("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = \
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if args.profile:
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(args.profile_dir, "ort")
    session = ort.InferenceSession(args.model, options,
                                   providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def call(x):
        return session.run(None, {name: x})[0]
    return call, ort.__version__, session


def load_openvino(args, precision):
    """OpenVINO CPU plugin: INFERENCE_PRECISION_HINT set explicitly (its
    default on AVX512-BF16 hosts is bf16), PERFORMANCE_HINT LATENCY,
    INFERENCE_NUM_THREADS = --threads; one infer request."""
    ov = _import("openvino")
    config = {"INFERENCE_PRECISION_HINT": precision,
              "PERFORMANCE_HINT": "LATENCY",
              "INFERENCE_NUM_THREADS": args.threads}
    if args.profile:
        config["PERF_COUNT"] = True
    compiled = ov.Core().compile_model(args.model, "CPU", config)
    got = compiled.get_property("INFERENCE_PRECISION_HINT")
    if got != getattr(ov.Type, precision):
        fail(f"OpenVINO compiled with INFERENCE_PRECISION_HINT {got}, "
             f"asked {precision}")
    request = compiled.create_infer_request()

    def call(x):
        return request.infer({0: x})[0].copy()
    return call, ov.get_version().split("-")[0], request


def load_iree(args):
    """IREE runtime, local-task driver with --threads task workers (the
    model was built by iree-compile for llvm-cpu, target-cpu host)."""
    rt = _import("iree.runtime")
    rt.flags.parse_flags(f"--task_topology_group_count={args.threads}")
    context = rt.SystemContext(config=rt.Config("local-task"))
    context.add_vm_module(rt.VmModule.mmap(context.instance, args.model))
    module = context.modules.module
    names = [n for n in module.vm_module.function_names
             if not n.startswith("__") and not n.endswith("$async")]
    if len(names) != 1:
        fail(f"{args.model}: expected one entry function, found {names}")
    function = module[names[0]]

    def call(x):
        return np.asarray(function(x).to_host())
    from importlib.metadata import version
    return call, version("iree-base-runtime"), None


def load_torch(args):
    """Debian's torch: the static-shape model of bench/onnx_vmoe.py, eager,
    torch.set_num_threads(--threads), under torch.no_grad."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(root, "python"))
    torch = _import("torch")
    import onnx_vmoe
    from vmoe_ref import model as vmodel

    torch.set_num_threads(args.threads)
    module = onnx_vmoe.StaticVMoE(
        vmodel.load_model(args.desc, args.weights), args.batch)

    def call(x):
        with torch.no_grad():
            return module(torch.from_numpy(x)).numpy()
    return call, torch.__version__, None


def load(args):
    if args.engine == "onnxruntime":
        return load_onnxruntime(args)
    if args.engine in ("openvino", "openvino-bf16"):
        return load_openvino(
            args, "bf16" if args.engine == "openvino-bf16" else "f32")
    if args.engine == "iree":
        return load_iree(args)
    return load_torch(args)


def check(got, want, args):
    """The check record; fails the process when the logits are off.

    f32 (--atol): every logit within atol. bf16 (--quantile-bound): the
    --quantile image's largest |diff| within the bound, and top-1
    agreement at least --min-top1."""
    if got.shape != want.shape:
        fail(f"logits of shape {list(got.shape)}, vmoe's {list(want.shape)}",
             CHECK_FAILED)
    per_image = np.abs(got.astype(np.float64) - want).max(axis=1)
    record = {"logits_max_abs_diff": float(per_image.max()),
              "same_top1": float((got.argmax(1) == want.argmax(1)).mean())}
    if not np.isfinite(got).all():
        fail("non-finite logits", CHECK_FAILED)
    if args.quantile_bound is None:
        if not record["logits_max_abs_diff"] <= args.atol:
            fail(f"logits differ from vmoe's: max |diff| "
                 f"{record['logits_max_abs_diff']:.2e} > {args.atol:g}",
                 CHECK_FAILED)
        return record
    record["quantile"] = args.quantile
    record["quantile_abs_diff"] = float(np.quantile(per_image,
                                                    args.quantile))
    record["bound"] = args.quantile_bound
    if not record["quantile_abs_diff"] <= args.quantile_bound:
        fail(f"logits differ from vmoe f32's: {args.quantile:g}-quantile "
             f"image max |diff| {record['quantile_abs_diff']:.2e} > "
             f"{args.quantile_bound:.2e}", CHECK_FAILED)
    if not record["same_top1"] >= args.min_top1:
        fail(f"top-1 agrees with vmoe f32's on "
             f"{100 * record['same_top1']:.1f}% of the images (< "
             f"{100 * args.min_top1:g}%)", CHECK_FAILED)
    return record


# Parts of the model by the exported node names (bench/onnx_vmoe.py's
# module names: blocks.i/attn/qkv, blocks.i/moe/experts, ...); first match.
PARTS = (("embedding", "patch embedding"),
         ("/attn/qkv", "attention projections"),
         ("/attn/out", "attention projections"),
         ("/attn/", "attention core"),
         ("/mlp/", "dense MLPs"),
         ("/moe/experts/", "expert MLPs"),
         ("/moe/", "routing, dispatch, combine"),
         ("/head/", "head"), ("logits", "head"))


def part_of(node_name):
    for key, part in PARTS:
        if key in node_name:
            return part
    return "other (norms, residual adds, layout)"


def profile_tables(samples, passes):
    """samples: [(node name, op type, implementation, ms)] summed over
    `passes` passes -> {"by_op": [...], "by_part": [...]}, each row with
    ms per pass and share of the total, largest first."""
    total = sum(ms for *_, ms in samples) or 1.0

    def table(key):
        sums = collections.defaultdict(float)
        for sample in samples:
            sums[key(sample)] += sample[-1]
        return [{"name": name, "ms_per_pass": ms / passes,
                 "share": ms / total}
                for name, ms in sorted(sums.items(), key=lambda kv: -kv[1])]
    return {"by_op": table(lambda s: f"{s[1]} ({s[2]})"),
            "by_part": table(lambda s: part_of(s[0]))}


def run_profile(args, call, handle, batches):
    """Times --profile passes under the engine's profiler; returns
    profile_tables."""
    samples = []
    if args.engine.startswith("openvino"):
        for _ in range(args.profile):
            for x in batches:
                call(x)
                # The counters hold the last inference only.
                samples += [(info.node_name, info.node_type, info.exec_type,
                             info.real_time.total_seconds() * 1e3)
                            for info in handle.get_profiling_info()
                            if info.status.name == "EXECUTED"]
        return profile_tables(samples, args.profile)
    if args.engine == "onnxruntime":
        # The profile holds every run since the session began: keep the
        # node events from the first timed run on (after the check pass).
        for _ in range(args.profile):
            for x in batches:
                call(x)
        with open(handle.end_profiling()) as f:
            events = json.load(f)
        runs = sorted(e["ts"] for e in events if e.get("name") == "model_run")
        start = runs[len(batches)]
        samples = [(e["name"][:-len("_kernel_time")],
                    e["args"].get("op_name", "?"),
                    e["args"].get("provider", "").replace(
                        "ExecutionProvider", ""), e["dur"] / 1e3)
                   for e in events if e.get("cat") == "Node"
                   and e["name"].endswith("_kernel_time") and e["ts"] >= start]
        return profile_tables(samples, args.profile)
    fail(f"--profile: no per-op profiler for {args.engine}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=ENGINES, required=True)
    parser.add_argument("--model", help="ONNX file or IREE .vmfb")
    parser.add_argument("--desc", help="description (torch)")
    parser.add_argument("--weights", help="safetensors (torch)")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--images-npy", required=True,
                        help="normalized images [N, C, H, W] float32")
    parser.add_argument("--reference-npy", required=True,
                        help="vmoe f32's logits [N, classes]")
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--quantile", type=float, default=0.9)
    parser.add_argument("--quantile-bound", type=float)
    parser.add_argument("--min-top1", type=float, default=0.9)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0,
                        help="time N passes with the per-op profiler")
    parser.add_argument("--profile-dir", default=".")
    args = parser.parse_args()

    try:
        images = np.load(args.images_npy).astype(np.float32)
        want = np.load(args.reference_npy).astype(np.float64)
    except (OSError, ValueError) as err:
        fail(f"cannot read the images or reference logits: {err}")
    if images.ndim != 4 or want.ndim != 2 or len(images) != len(want):
        fail(f"images of shape {list(images.shape)} and logits of shape "
             f"{list(want.shape)} do not match")
    if len(images) % args.batch:
        fail(f"{len(images)} images are not a multiple of batch "
             f"{args.batch}")
    batches = [np.ascontiguousarray(images[i:i + args.batch])
               for i in range(0, len(images), args.batch)]
    start = time.perf_counter()
    try:
        call, version, handle = load(args)
        # The check pass is also the warm-up (first-call initialization).
        got = np.concatenate([call(x) for x in batches])
    except SystemExit:
        raise
    except Exception as err:
        fail(f"{args.engine} failed: {type(err).__name__}: "
             f"{str(err).strip().splitlines()[-1] if str(err).strip() else ''}")
    result = {"engine": args.engine, "version": version,
              "threads": args.threads, "batch": args.batch,
              "load_and_check_s": time.perf_counter() - start}
    result.update(check(got, want, args))
    if args.profile:
        result["profile"] = run_profile(args, call, handle, batches)
        print(json.dumps(result))
        return 0
    rates = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for x in batches:
            call(x)
        rates.append(len(images) / (time.perf_counter() - start))
    result["images_per_s"] = float(np.median(rates))
    result["repeats"] = rates
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
