"""Mutation fuzzer of the checkpoint importers (plain Python, seeded).

    cd python && /usr/bin/python3 -m vmoe_tools.fuzz_importers \
        --kind pth --seconds 900 --out /tmp/fuzz

Kinds: `npz` (Flax .npz through import_flax), `pth` (torch checkpoints,
zip and legacy, through import_timm), `safetensors` (import_timm and
vmoe.safetensors.load), `config` (a Flax model config through
import_flax), `description` (checks.check_description on the repository's
descriptions; with --vmoe-compile, each verdict compared with the
compiler's), or `all` (round robin). Seeds are small valid checkpoints
written by the importer tests' helpers (plus, for pth, hostile pickles
whose code would create a marker file). Each input (fuzz_mutations.py) is
a seed mutated by byte edits (bit flips, interesting integers, inserted,
deleted or duplicated runs, truncation, splices) or by edits that keep the
container valid: a zip member's bytes re-zipped with a good CRC, a .npy header's
shape, a pickle's globals and integers, a safetensors header or JSON
value replaced by a hostile one (huge, negative, NaN, nested 100,000 deep,
of the wrong type); or a seed's arrays edited (a shape, a key, a dtype,
NaN) and written again as a valid .npz, .pth or .safetensors.

The importers are called unguarded (`__wrapped__`, without the catch-all
of vmoe.importers), then their result is checked (check_weights) and
upcycled. A finding is any exception other than ImporterError (a
traceback), an ImporterError whose message has a newline or reports
running out of memory, an input running longer than --timeout seconds,
or the marker file of a hostile pickle existing (code ran). Findings are
saved under OUT/findings (input and traceback); the exit status is 1 if
there is any. Memory is limited (RLIMIT_AS) so that an unchecked size
fails fast. An input whose error message (digits removed) is new joins
the corpus, a crude coverage signal.
"""

import argparse
import glob
import importlib
import io
import json
import os
import random
import re
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

from vmoe import _json, safetensors
from vmoe.errors import FormatError
from vmoe.importers import checks, common, flax, timm
from vmoe.importers import test_importers as helpers
from vmoe_tools.fuzz_mutations import mutate, rezip

# The module (vmoe.importers.upcycle is the guarded function).
upcycle = importlib.import_module("vmoe.importers.upcycle")

KINDS = ("npz", "pth", "safetensors", "config", "description")
_EXTENSIONS = {"npz": ".npz", "pth": ".pth", "safetensors": ".safetensors",
               "config": ".json", "description": ".json"}
# Inputs kept per kind (seeds and inputs with a new outcome).
_MAX_CORPUS = 2000


class Hang(BaseException):
    """An input ran past the timeout (a BaseException: no `except
    Exception` of the code under test can swallow it)."""


class Finding(Exception):
    """A result that breaks the importers' rules (not a traceback)."""


# -- seeds ------------------------------------------------------------------


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _seed_npz(tmp):
    seeds = []
    for scheme in ("vmoe", "vit_jax", "big_vision"):
        config = helpers.CONFIG if scheme == "vmoe" else {
            k: v for k, v in helpers.CONFIG.items() if k != "encoder"}
        if scheme != "vmoe":
            config = dict(config, encoder={"num_layers": 2, "mlp_dim": 12,
                                           "num_heads": 2})
        path, _ = helpers.flax_checkpoint(tmp, config, scheme)
        seeds.append((_read(path), config))
    return seeds


def _marker_pickle(marker):
    """A pickle that would run `touch marker` if its globals resolved."""
    command = f"touch {marker}".encode()
    return (b"\x80\x02cposix\nsystem\nq\x00X" + struct.pack("<I", len(command))
            + command + b"q\x01\x85q\x02Rq\x03.")


def _seed_pth(tmp, marker):
    import torch  # pylint: disable=import-outside-toplevel
    state = {k: torch.from_numpy(v) for k, v in
             helpers.timm_state(depth=2).items()}
    training = {"epoch": 3, "arch": "vit", "state_dict": state,
                "optimizer": {"state": {0: {"step": 3, "exp_avg":
                                            torch.zeros(4)}},
                              "param_groups": [{"lr": 0.1, "params": [0],
                                                "betas": (0.9, 0.99)}]},
                "args": argparse.Namespace(lr=0.1, model="vit",
                                           device="cuda:0", input_size=None),
                "metric": 0.5, "version": 2}
    seeds = []
    for obj in (state, training):
        for zipped in (True, False):
            buffer = io.BytesIO()
            torch.save(obj, buffer, _use_new_zipfile_serialization=zipped)
            seeds.append(buffer.getvalue())
    # The zip seed with its data.pkl replaced by the marker pickle.
    seeds.append(rezip(seeds[0], lambda name, data: _marker_pickle(marker)
                        if name.endswith("data.pkl") else data))
    return seeds


def _seed_safetensors(tmp):
    seeds = []
    for dtype in ("F32", "F16", "BF16"):
        seeds.append(_read(helpers.write_timm(
            tmp, helpers.timm_state(depth=2), dtype)))
    return seeds


def _seed_descriptions(tmp):
    """The repository's descriptions (every family) and imported ones."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    seeds = []
    for path in sorted(glob.glob(os.path.join(root, "examples/*/*.json")) +
                       glob.glob(os.path.join(root,
                                              "test/Tools/Inputs/*.json"))):
        seeds.append(_read(path))
    path, _ = helpers.flax_checkpoint(tmp)
    desc, _ = flax.import_flax(path, helpers.CONFIG)
    seeds.append(json.dumps(desc).encode())
    # A `preprocess` with a resize_small and a crop, and `input`.
    desc, _ = timm.import_timm(helpers.write_timm(tmp, helpers.timm_state()),
                               heads=2)
    seeds.append(json.dumps(desc).encode())
    return seeds

# -- running one input ------------------------------------------------------


def _use_result(desc, tensors, work):
    """What a user does next: check, upcycle a dense model, write."""
    common.check_weights(desc, tensors)
    if "moe" not in desc:
        desc, tensors = upcycle.upcycle(desc, tensors,
                                        "experts=2,k=1,placement=every-2")
    common.write_model(os.path.join(work, "out"), desc, tensors)


def _compiler_verdict(compiler, path):
    """None, or the one line vmoe-compile refuses `path` with (its
    "error: PATH: " prefix removed)."""
    process = subprocess.run([compiler, path, "--emit=mlir", "-o",
                              os.devnull], capture_output=True, text=True,
                             errors="replace", check=False)
    if process.returncode == 0:
        return None
    lines = process.stderr.strip().splitlines() or ["(no message)"]
    return lines[-1].split(f"{path}: ", 1)[-1]


def _check_description(path, compiler):
    """check_description on a mutated description (NaN and infinity
    parsed, as a dict from Python could hold them); what it accepts must
    be writable as JSON. With `compiler` (vmoe-compile), a description
    that parses as vmoe-compile parses JSON must get its verdict and
    message (but for which of several unknown fields is named)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        desc = json.loads(data)
    except (ValueError, RecursionError):
        raise common.ImporterError("unparsable") from None
    try:
        checks.check_description(desc)
        mine = None
    except common.ImporterError as err:
        mine = str(err)
    if mine is None:
        try:
            json.dumps(desc, allow_nan=False)
        except ValueError as err:
            raise Finding(f"check_description accepted {err}") from None
    try:
        _json.parse(data, "description")
    except FormatError:
        compiler = None  # not JSON to vmoe-compile: nothing to compare
    if compiler:
        theirs = _compiler_verdict(compiler, path)
        if mine != theirs and not (
                mine and theirs and mine.endswith(": unknown field")
                and theirs.endswith(": unknown field")):
            raise Finding(f"check_description: {mine!r}, vmoe-compile: "
                          f"{theirs!r}")
    if mine is not None:
        raise common.ImporterError(mine)


def run_one(kind, path, work, seed_config, compiler=None):
    """Imports `path` as `kind`; raises what the importers raise."""
    if kind == "description":
        _check_description(path, compiler)
        return
    import_flax = flax.import_flax
    import_timm = timm.import_timm
    if kind == "npz":
        desc, tensors = import_flax(path, seed_config)
    elif kind == "config":
        desc, tensors = import_flax(seed_config, path)
    else:
        if kind == "safetensors":
            try:
                safetensors.load(path, dtypes=tuple(safetensors.DTYPES))
            except safetensors.FormatError as err:
                if "\n" in str(err):
                    raise Finding(f"two-line FormatError: {err!r}") from None
        desc, tensors = import_timm(path, heads=2)
    _use_result(desc, tensors, work)


def _signature(text):
    return re.sub(r"\d+", "N", text)[:160]


class Fuzzer:
    """The loop: seeds, mutation, execution, findings, statistics."""

    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.work = tempfile.mkdtemp(prefix="vmoe-fuzz-")
        self.marker = os.path.join(self.work, "MARKER")
        self.findings_dir = os.path.join(args.out, "findings")
        os.makedirs(self.findings_dir, exist_ok=True)
        self.corpus, self.seen, self.stats = {}, set(), {}
        self.findings = {}
        # Errors in destructors print to stderr instead of raising.
        self.unraisable = []
        sys.unraisablehook = lambda hook: self.unraisable.append(
            f"{hook.exc_type.__name__}: {hook.exc_value}")
        self.npz_seeds, self.config_npz = [], None
        kinds = KINDS if args.kind == "all" else (args.kind,)
        self.first, self.arrays = {}, {}
        for kind in kinds:
            self.corpus[kind] = self._seeds(kind)
            self.first[kind] = len(self.corpus[kind])
            if kind in ("npz", "pth", "safetensors"):
                self.arrays[kind] = self._arrays(kind)
            self.stats[kind] = {"executions": 0, "accepted": 0,
                                "refused": 0, "findings": 0}

    def _seeds(self, kind):
        if kind in ("npz", "config"):
            if not self.npz_seeds:
                self.npz_seeds = _seed_npz(self.work)
        if kind == "npz":
            return [data for data, _ in self.npz_seeds]
        if kind == "config":
            path = os.path.join(self.work, "seed.npz")
            with open(path, "wb") as f:
                f.write(self.npz_seeds[0][0])
            self.config_npz = path
            return [json.dumps(self.npz_seeds[0][1]).encode()]
        if kind == "pth":
            return _seed_pth(self.work, self.marker)
        if kind == "description":
            return _seed_descriptions(self.work)
        return _seed_safetensors(self.work)

    def _arrays(self, kind):
        """{name: array} of each valid seed of `kind` (read as the
        importers read them)."""
        out = []
        for number, data in enumerate(self.corpus[kind]):
            path = os.path.join(self.work, f"seed{number}{_EXTENSIONS[kind]}")
            with open(path, "wb") as f:
                f.write(data)
            try:
                out.append(flax.load_checkpoint(path) if kind == "npz" else
                           timm.load_state_dict(path))
            except common.ImporterError:
                pass  # the hostile seed
        return out

    def _seed_config(self, kind, index):
        if kind == "npz":
            return self.npz_seeds[index % len(self.npz_seeds)][1]
        if kind == "config":
            return self.config_npz
        return None

    def _record(self, kind, data, signature, text):
        self.stats[kind]["findings"] += 1
        if signature in self.findings:
            self.findings[signature][1] += 1
            return
        number = len(self.findings)
        stem = os.path.join(self.findings_dir, f"{kind}-{number}")
        with open(stem + _EXTENSIONS[kind], "wb") as f:
            f.write(data)
        with open(stem + ".txt", "w", encoding="utf-8") as f:
            f.write(text)
        self.findings[signature] = [stem, 1]
        print(f"FINDING {kind}-{number}: {signature}", flush=True)

    def execute(self, kind, data, index):
        path = os.path.join(self.work, "input" + _EXTENSIONS[kind])
        with open(path, "wb") as f:
            f.write(data)
        self.stats[kind]["executions"] += 1
        self.unraisable.clear()
        signal.alarm(self.args.timeout)
        try:
            run_one(kind, path, self.work, self._seed_config(kind, index),
                    self.args.vmoe_compile)
            outcome = "accepted"
        except common.ImporterError as err:
            text = str(err)
            if "\n" in text or "out of memory" in text:
                raise Finding(f"bad ImporterError: {text!r}") from None
            outcome = "refused: " + _signature(text.replace(path, "INPUT"))
        finally:
            signal.alarm(0)
        if os.path.exists(self.marker):
            os.remove(self.marker)
            raise Finding("the marker file exists: a pickle ran code")
        if self.unraisable:
            raise Finding(f"an exception Python could not raise (printed "
                          f"on stderr): {self.unraisable[0]}")
        return outcome

    def step(self, kind):
        seeds = self.corpus[kind]
        index = self.rng.randrange(len(seeds))
        data = mutate(self.rng, kind, seeds[index], seeds,
                      self.arrays.get(kind))
        try:
            outcome = self.execute(kind, data, index)
        except Hang:
            self._record(kind, data, "hang",
                         f"ran past {self.args.timeout} s\n")
            return
        except Finding as err:
            self._record(kind, data, str(err)[:160], str(err) + "\n")
            return
        except Exception as err:  # pylint: disable=broad-except
            frames = traceback.extract_tb(err.__traceback__)
            where = f"{os.path.basename(frames[-1].filename)}:" \
                    f"{frames[-1].lineno}" if frames else "?"
            self._record(kind, data, f"{type(err).__name__} at {where}",
                         traceback.format_exc())
            return
        self.stats[kind]["accepted" if outcome == "accepted"
                         else "refused"] += 1
        if (kind, outcome) not in self.seen and len(data) < 4_000_000:
            self.seen.add((kind, outcome))
            if len(seeds) < _MAX_CORPUS:
                seeds.append(data)
            else:  # keep the seeds, replace a later input
                seeds[self.rng.randrange(self.first[kind], len(seeds))] = data

    def run(self):
        kinds = list(self.corpus)
        start = time.monotonic()
        turn = 0
        while time.monotonic() < start + self.args.seconds:
            self.step(kinds[turn % len(kinds)])
            turn += 1
        return self.report(time.monotonic() - start)

    def report(self, seconds):
        for kind, stats in self.stats.items():
            print(f"fuzz_importers: {kind}: {stats['executions']} "
                  f"executions, {stats['accepted']} accepted, "
                  f"{stats['refused']} refused with one line, "
                  f"{len([1 for k, o in self.seen if k == kind])} distinct "
                  f"outcomes, {stats['findings']} findings")
        for signature, (stem, count) in self.findings.items():
            print(f"fuzz_importers: finding {stem} ({count}x): {signature}")
        total = sum(stats["executions"] for stats in self.stats.values())
        print(f"fuzz_importers: {total} executions in {seconds:.0f} s, "
              f"{len(self.findings)} distinct findings")
        return 1 if self.findings else 0


def _on_alarm(signum, frame):
    del signum, frame
    raise Hang()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="all", choices=KINDS + ("all",))
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=int, default=20,
                        help="seconds one input may run (a hang)")
    parser.add_argument("--memory-mb", type=int, default=3072,
                        help="address space the inputs may add (MB)")
    parser.add_argument("--out", default="fuzz-importers",
                        help="findings go to OUT/findings")
    parser.add_argument("--vmoe-compile", metavar="PATH",
                        help="kind description: compare each verdict with "
                             "vmoe-compile --emit=mlir (slow)")
    args = parser.parse_args(argv)
    fuzzer = Fuzzer(args)
    signal.signal(signal.SIGALRM, _on_alarm)
    # Seeds are written (torch imported); now cap the address space so
    # that an allocation from an unchecked size fails at once.
    with open("/proc/self/statm", encoding="ascii") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    limit = used + args.memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    np.seterr(all="ignore")
    return fuzzer.run()


if __name__ == "__main__":
    sys.exit(main())
