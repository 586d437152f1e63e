"""The importers' torch checkpoint reader (vmoe/importers/_torch.py) against
torch.save: what it reads, and that no checkpoint runs code.

    pth_checks.py WORKDIR

Read (zip and legacy format, pickle protocols 2 and 4): a timm training
checkpoint (CheckpointSaver's state_dict, args = argparse.Namespace,
optimizer state, epoch, metric) imports; state dicts of f32, f16, bf16 and
f64 tensors, transposed, sliced, sharing storage, Parameters, 0-d and
empty ones read equal to torch.load of the same file. Refused with one
line, and the marker file that their code would create never appears:
every hostile variant (a __reduce__ calling os.system, builtins.exec or
builtins.open at the top, nested in args, in the state dict, in the
optimizer state, as a dict key; a tensor rebuilt with an unexpected state;
a user class with __setstate__; pickle protocols 0 to 5; an extension
code; a dotted global), TorchScript archives, whole nn.Modules, sparse,
meta and quantized tensors, torch < 0.4's tar format, damaged files. The
command line on a hostile file: exit 1, one line, no output written.
"""

import argparse
import copyreg
import io
import os
import pickle
import subprocess
import sys
import tarfile
import zipfile

import numpy as np
import torch

from vmoe.importers import ImporterError, import_timm
from vmoe.importers import test_importers as helpers
from vmoe.importers import timm
from vmoe.importers.test_hardening import rezip

work = sys.argv[1]
marker = os.path.join(work, "MARKER")
failures = []


class System:
    """A pickle that runs `touch MARKER` through os.system."""

    def __reduce__(self):
        return (os.system, (f"touch {marker}",))


class Exec:
    def __reduce__(self):
        return (exec, (f"open({marker!r}, 'w').close()",))


class Open:
    def __reduce__(self):
        return (open, (marker, "w"))


class Sneaky:
    """Pickled by class (NEWOBJ + BUILD): its __setstate__ would run."""

    def __setstate__(self, state):
        open(marker, "w").close()  # pylint: disable=consider-using-with


def state_dict():
    return {k: torch.from_numpy(v) for k, v in
            helpers.timm_state(depth=2).items()}


def training(**replace):
    """A timm CheckpointSaver checkpoint (train.py's save_checkpoint)."""
    checkpoint = {
        "epoch": 7, "arch": "vit_tiny_patch4", "state_dict": state_dict(),
        "optimizer": {"state": {0: {"step": torch.tensor(70.0),
                                    "exp_avg": torch.zeros(8),
                                    "exp_avg_sq": torch.zeros(8)}},
                      "param_groups": [{"lr": 0.001, "betas": (0.9, 0.999),
                                        "eps": 1e-8, "weight_decay": 0.05,
                                        "params": [0]}]},
        "version": 2, "metric": 71.25,
        "args": argparse.Namespace(model="vit_tiny_patch4", lr=0.001,
                                   epochs=300, mean=(0.5, 0.5, 0.5),
                                   input_size=None, device="cuda:0",
                                   amp=True, torch_device=torch.device("cpu"),
                                   drop_path=0.1)}
    checkpoint.update(replace)
    return checkpoint


def save(name, obj, zipped=True, protocol=2):
    path = os.path.join(work, name)
    torch.save(obj, path, _use_new_zipfile_serialization=zipped,
               pickle_protocol=protocol)
    return path


def expect_refusal(label, path, fragment):
    try:
        import_timm(path, heads=2)
        message = None
    except ImporterError as err:
        message = str(err)
    if message is None or "\n" in message or fragment not in message:
        failures.append(label)
        print(f"FAIL {label}: expected {fragment!r}, got {message!r}")
    if os.path.exists(marker):
        failures.append(label)
        print(f"FAIL {label}: the marker exists: the checkpoint ran code")
        os.remove(marker)
    return message


def with_data_pkl(path, edit):
    """The zip checkpoint `path` with its data.pkl replaced by edit(bytes)."""
    rezip(path, lambda name, data: edit(data) if name.endswith("data.pkl")
          else data)
    return path


def check_reads():
    count = 0
    sd = {"a": torch.randn(3, 4).t(), "h": torch.randn(5).half(),
          "b": torch.randn(6).bfloat16(), "d": torch.randn(2, 2).double(),
          "p": torch.nn.Parameter(torch.randn(3)), "s": torch.tensor(2.5),
          "e": torch.zeros(0, 3), "c": torch.randn(10, 20)[::3, 2:17:4]}
    sd["a_view"] = sd["a"][1:, 1:]
    for zipped in (True, False):
        for protocol in (2, 4):
            path = save("read.pth", sd, zipped, protocol)
            want = torch.load(path)  # our own file: trusted
            got = timm.load_state_dict(path)
            for key, value in want.items():
                ref = value.detach().float().numpy()
                if got[key].shape != ref.shape or \
                        not np.array_equal(got[key], ref):
                    failures.append(f"read {key}")
                    print(f"FAIL read {key} (zip {zipped}, protocol "
                          f"{protocol}): {got[key]} != {ref}")
            path = save("train.pth.tar", training(), zipped, protocol)
            desc, tensors = import_timm(path, heads=2)
            direct = import_timm(helpers.write_timm(
                work, {k: v.numpy() for k, v in state_dict().items()}),
                heads=2)
            same = desc == dict(direct[0], name="train.pth") and all(
                np.array_equal(tensors[k], direct[1][k]) for k in tensors)
            if not same:
                failures.append("training checkpoint")
                print(f"FAIL training checkpoint (zip {zipped}): not the "
                      "weights of its state_dict")
            count += 2
    return count


def _shared(pair, depth, empty=None):
    """Opcodes that replace the value on the stack by a container of
    2^depth nodes built from `depth` shared levels: tuples (pair =
    TUPLE2), or with `empty` = EMPTY_LIST, lists [x, x] (APPENDS)."""
    out = b"q\x000"  # PUT 0, POP
    for i in range(depth):
        get = b"h" + bytes([i])
        out += (get + get + pair if empty is None else
                empty + b"(" + get + get + b"e") + b"q" + bytes([i + 1]) + \
            b"0"
    return out + b"h" + bytes([depth])


def hostile_files():
    """(label, path, fragment of the refusal) of every hostile variant."""
    cases = []
    for zipped in (True, False):
        tag = "zip" if zipped else "legacy"
        sd = state_dict()
        for label, obj in (
                ("top-level os.system", System()),
                ("top-level exec", Exec()),
                ("top-level open", Open()),
                ("in args", training(args=argparse.Namespace(x=System()))),
                ("in args list", training(args=argparse.Namespace(
                    mean=[0.5, Exec()]))),
                ("in state_dict", training(state_dict=dict(sd, x=Open()))),
                ("as a state_dict key", {System(): torch.zeros(2)}),
                ("in optimizer", training(optimizer={"state": {0: {
                    "step": System()}}})),
                ("class with __setstate__", training(args=Sneaky())),
                ("nn.Module", torch.nn.Linear(2, 2)),
                ("sparse tensor", dict(sd, sp=torch.eye(3).to_sparse())),
                ("quantized tensor", dict(sd, q=torch.quantize_per_tensor(
                    torch.ones(2), 0.1, 0, torch.qint8)))):
            path = save(f"{label.replace(' ', '_')}-{tag}.pth", obj, zipped)
            cases.append((f"{label} ({tag})", path, "refused: the pickle "
                          "names "))
        for protocol in (0, 1, 3, 4, 5):
            if protocol == 5 and not zipped:
                continue
            path = save(f"protocol{protocol}-{tag}.pth", System(), zipped,
                        protocol)
            cases.append((f"protocol {protocol} ({tag})", path,
                          "refused: the pickle names posix.system"))
    meta = torch.empty(2, device="meta")
    path = save("meta.pth", {"m": meta})
    cases.append(("meta tensor", path, "refused: the pickle names torch."))
    # A tensor rebuilt, then BUILD with a state (torch's weights_only
    # loader raised TypeError there, and the importer retried unsafely).
    path = with_data_pkl(save("state.pth", {"t": torch.ones(2)}),
                         lambda d: d[:-2] + b"}b" + d[-2:])
    cases.append(("tensor with a state", path, "tensor with a state"))
    path = with_data_pkl(save("state2.pth", {"t": torch.ones(2)}),
                         lambda d: d[:-2] + pickle.dumps(
                             (System(),), 2)[2:-1] + b"b" + d[-2:])
    cases.append(("tensor with a hostile state", path,
                  "refused: the pickle names posix.system"))
    # A dotted global name (protocol 4 STACK_GLOBAL) and an extension code.
    path = with_data_pkl(save("dotted.pth", {"t": torch.ones(2)}),
                         lambda d: d.replace(b"_rebuild_tensor_v2",
                                             b"_rebuild_tensor_v2.__globals__"
                                             ))
    cases.append(("dotted global", path, "refused: the pickle names "
                  "torch._utils._rebuild_tensor_v2.__globals__"))
    copyreg.add_extension("posix", "system", 241)
    path = with_data_pkl(save("ext.pth", {"t": torch.ones(2)}),
                         lambda d: b"\x80\x02\x82\xf1X" + len(
                             f"touch {marker}").to_bytes(4, "little") +
                         f"touch {marker}".encode() + b"\x85R.")
    cases.append(("extension code", path, "refused: the pickle names "
                  "posix.system"))
    # Denial of service: a dict key of 2^60 nodes through shared
    # references (hashing it never ends), a list of as many as a value
    # and as a persistent id (their str() never ends), a memo index of
    # 2^32 - 1 (the C unpickler would allocate a memo that large).
    for label, pickled, fragment in (
            ("tuple of 2^60 nodes as a key", b"\x80\x02}N" + _shared(
                b"\x86", 60) + b"Ns.", "a tuple of more than 1000000 nodes"),
            ("list of 2^60 nodes as a value", b"\x80\x02}X\x01\x00\x00\x00x]"
             + _shared(b"", 60, empty=b"]") + b"s.",
             "'x' is not a tensor (a list)"),
            ("list of 2^60 nodes as a persistent id", b"\x80\x02]" + _shared(
                b"", 60, empty=b"]") + b"Q.", "persistent id a list"),
            ("memo index 2^32 - 1", b"\x80\x02Nr\xff\xff\xff\xff.",
             "pickle memo index 4294967295"),
            # Protocol 5's buffers (a damaged stream of them made CPython
            # print a SystemError).
            ("bytearray", b"\x80\x05\x96\x03" + bytes(7) + b"abc\x98.",
             "pickle opcode BYTEARRAY8")):
        path = with_data_pkl(save("dos.pth", {"t": torch.ones(2)}),
                             lambda d, p=pickled: p)
        os.rename(path, path.replace("dos", label.replace(" ", "_")))
        cases.append((label, path.replace("dos", label.replace(" ", "_")),
                      fragment))
    scripted = torch.jit.script(torch.nn.Linear(2, 2))
    path = os.path.join(work, "script.pth")
    torch.jit.save(scripted, path)
    cases.append(("TorchScript archive", path, "a TorchScript archive"))
    path = os.path.join(work, "old.pth")
    with tarfile.open(path, "w") as tar:
        for name in ("storages", "tensors", "pickle"):
            info = tarfile.TarInfo(name)
            data = pickle.dumps(System(), 2)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    cases.append(("tar format", path, "the tar format of torch < 0.4"))
    with open(save("good.pth", state_dict()), "rb") as f:
        data = f.read()
    with open(save("l.pth", state_dict(), False), "rb") as f:
        legacy = f.read()
    deflated = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(
            deflated, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    for label, damaged in (("deflated zip", deflated.getvalue()),
                           ("truncated zip", data[:len(data) // 2]),
                           ("empty file", b""),
                           ("not a checkpoint", b"hello"),
                           ("truncated legacy", legacy[:-10])):
        path = os.path.join(work, label.replace(" ", "_") + ".pth")
        with open(path, "wb") as f:
            f.write(damaged)
        cases.append((label, path, path + ": "))
    return cases


def check_refusals():
    cases = hostile_files()
    for label, path, fragment in cases:
        expect_refusal(label, path, fragment)
    for label, path, fragment in (
            ("int tensor", save("int.pth", dict(state_dict(), **{
                "blocks.0.norm1.weight": torch.ones(8, dtype=torch.int64)})),
             "has dtype int64, expected floating point"),
            ("not a tensor", save("float.pth", dict(state_dict(),
                                                    **{"x": 0.5})),
             "'x' is not a tensor (a float)"),
            ("empty pos_embed", save("empty.pth", dict(
                state_dict(), pos_embed=torch.zeros(1, 0, 8))),
             "'pos_embed' has shape [1, 0, 8]: an empty dimension")):
        expect_refusal(label, path, fragment)
        cases.append(label)
    copyreg.remove_extension("posix", "system", 241)
    return len(cases)


def check_command_line():
    path = save("cli.pth", training(args=argparse.Namespace(x=System())))
    out = os.path.join(work, "cli-out")
    process = subprocess.run(
        [sys.executable, "-m", "vmoe.importers", "timm", path, "--heads", "2",
         "-o", out], capture_output=True, text=True, check=False)
    lines = process.stderr.splitlines()
    ok = process.returncode == 1 and len(lines) == 1 and \
        "refused" in lines[0] and not os.path.exists(marker) and \
        not os.path.exists(out + ".json")
    if not ok:
        failures.append("command line")
        print(f"FAIL command line: status {process.returncode}, {lines}")


reads = check_reads()
refusals = check_refusals()
check_command_line()
print(f"pth_checks: {reads} checkpoints read as torch.load reads them")
print(f"pth_checks: {refusals} hostile or damaged checkpoints refused with "
      "one line, no code run")
print(f"pth_checks: {len(failures)} failures")
sys.exit(1 if failures else 0)
