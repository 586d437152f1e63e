"""vmoe.compile(): a model description -> a loaded model, via vmoe-compile.

The description (a file, a JSON string or a dict; docs/ModelFormat.md §1) is
compiled by `vmoe-compile --emit=lib` into a shared library with the C API,
which `Model` loads through ctypes. Libraries are cached by the content of
the description, the options and the identity of the compiler and its
runtime, so compiling the same model again only loads it.

vmoe-compile is found, in this order: the `compiler` argument, the
environment variable VMOE_COMPILE, `vmoe-compile` on PATH, the build tree
of a source checkout (build/bin/vmoe-compile next to python/).
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from .errors import CompileError, VMoEError
from .model import Model

__all__ = ["cache_dir", "compile", "compile_library", "find_compiler"]

# Bumped when the cache layout or the command line changes meaning.
_CACHE_VERSION = "1"


def _check_executable(path, origin):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise VMoEError(f"{origin}: {path} is not an executable file")
    return os.path.abspath(path)


def find_compiler(compiler=None):
    """The path of vmoe-compile (see the module documentation)."""
    if compiler is not None:
        return _check_executable(os.fspath(compiler), "compiler")
    if os.environ.get("VMOE_COMPILE"):
        return _check_executable(os.environ["VMOE_COMPILE"], "VMOE_COMPILE")
    on_path = shutil.which("vmoe-compile")
    if on_path:
        return os.path.abspath(on_path)
    build_tree = (Path(__file__).resolve().parents[2] / "build" / "bin" /
                  "vmoe-compile")
    if build_tree.is_file() and os.access(build_tree, os.X_OK):
        return str(build_tree)
    raise VMoEError("vmoe-compile not found: pass compiler=..., set "
                    "VMOE_COMPILE, put it on PATH, or build the project "
                    "(build/bin/vmoe-compile)")


def cache_dir():
    """The default library cache: $VMOE_CACHE_DIR, else
    $XDG_CACHE_HOME/vmoe (~/.cache/vmoe)."""
    if os.environ.get("VMOE_CACHE_DIR"):
        return Path(os.environ["VMOE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "vmoe"


def _read_description(description):
    """(JSON text, path or None, label for messages) of `description`."""
    if isinstance(description, dict):
        try:
            text = json.dumps(description, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as err:
            raise VMoEError(f"<description>: not JSON: {err}") from None
        return text, None, "<description>"
    if isinstance(description, os.PathLike):
        path = os.fspath(description)
    elif isinstance(description, str):
        if description.lstrip().startswith("{"):
            return description, None, "<description>"
        path = description
    else:
        raise TypeError("description must be a path, a JSON string or a "
                        f"dict, not {type(description).__name__}")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), os.path.abspath(path), path
    except OSError as err:
        raise VMoEError(f"{path}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise VMoEError(f"{path}: not UTF-8 (byte {err.start})") from None


def _flag(name, value):
    """The vmoe-compile flag of keyword `name` (group_size -> --group-size)."""
    if name == "opt_level":
        try:
            return f"-O{int(value)}"
        except (TypeError, ValueError):
            raise VMoEError(f"opt_level must be an integer, got "
                            f"{value!r}") from None
    flag = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return flag if value else f"{flag}=false"
    return f"{flag}={value}"


def _flags(target, precision, options):
    flags = [f"--target={target}"]
    # f32 is the default of every vmoe-compile; bf16 needs one that knows
    # --precision.
    if precision not in (None, "f32"):
        flags.append(f"--precision={precision}")
    for name in sorted(options):
        if options[name] is not None:
            flags.append(_flag(name, options[name]))
    return flags


def _file_identity(path):
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return [os.path.realpath(path), stat.st_mtime_ns, stat.st_size]


def _cache_key(text, flags, compiler):
    try:
        canonical = json.dumps(json.loads(text), sort_keys=True)
    except (ValueError, RecursionError):
        canonical = text  # vmoe-compile reports the error
    runtime = Path(os.path.realpath(compiler)).parent.parent / "lib"
    identity = {
        "version": _CACHE_VERSION,
        "description": canonical,
        "flags": flags,
        "compiler": _file_identity(compiler),
        "runtime": [_file_identity(runtime / name) for name in (
            "libvmoe_runtime.a", "vmoe_runtime.link",
            "libvmoe_cuda_runtime.a", "vmoe_cuda_runtime.link")],
    }
    blob = json.dumps(identity, sort_keys=True).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:32]


def _one_line(stderr, returncode, replacements):
    """The first error line of vmoe-compile's stderr, without its prefix."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    chosen = next((line for line in lines if "error:" in line),
                  lines[0] if lines else
                  f"vmoe-compile exited with status {returncode}")
    # "vmoe-compile: error: ...", "error: ..." or llvm::cl's "vmoe-compile: ..."
    chosen = re.sub(r"^(\S*vmoe-compile: )?(error: )?", "", chosen)
    for old, new in replacements.items():
        chosen = chosen.replace(old, new)
    return chosen


def _run_compiler(compiler, description_path, library, flags, replacements):
    command = [compiler, description_path, "--emit=lib", "-o", library,
               *flags]
    try:
        process = subprocess.run(command, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 errors="replace", check=False)
    except OSError as err:
        raise VMoEError(f"{compiler}: {err.strerror or err}") from None
    if process.returncode != 0:
        raise CompileError(_one_line(process.stderr, process.returncode,
                                     replacements), command, process.stderr)
    return command


def compile_library(description, *, target="cpu", precision=None,
                    compiler=None, cache=None, **options):
    """Compiles `description` into a shared library; returns its path.

    Arguments as for `compile`; with `cache=False` the library is left in
    a new temporary directory that the caller owns.
    """
    try:
        return _compile_library(description, target, precision, compiler,
                                cache, options)
    except OSError as err:  # the cache or temporary directory
        raise VMoEError(f"{err.filename or 'vmoe cache'}: "
                        f"{err.strerror or err}") from None


def _compile_library(description, target, precision, compiler, cache,
                     options):
    compiler = find_compiler(compiler)
    text, path, label = _read_description(description)
    flags = _flags(target, precision, options)
    key = _cache_key(text, flags, compiler)
    if cache is False:
        root = Path(tempfile.mkdtemp(prefix="vmoe-"))
    else:
        root = Path(cache) if cache not in (None, True) else cache_dir()
        root.mkdir(parents=True, exist_ok=True)
        library = root / key / "libmodel.so"
        if library.is_file():
            return str(library)
    work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=root))
    try:
        if path is None:
            description_path = str(work / "model.json")
            with open(description_path, "w", encoding="utf-8") as f:
                f.write(text)
        else:
            description_path = path
        command = _run_compiler(compiler, description_path,
                                str(work / "libmodel.so"), flags,
                                {description_path: label})
        with open(work / "command.txt", "w", encoding="utf-8") as f:
            f.write(" ".join(command) + "\n")
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    if cache is False:
        return str(work / "libmodel.so")
    final = root / key
    try:
        os.rename(work, final)
    except OSError:
        # Compiled concurrently by another process: keep its copy.
        shutil.rmtree(work, ignore_errors=True)
    return str(final / "libmodel.so")


def compile(description, *, weights=None, target="cpu", precision=None,
            compiler=None, cache=None, threads=None, **options):
    """Compiles a model description and loads it; returns a `Model`.

    Args:
        description: a path to a description JSON file, a JSON string, or
            the description as a dict (docs/ModelFormat.md §1).
        weights: safetensors file (or {name: array}) to load right away;
            else call `Model.load_weights` before running the model.
        target: "cpu" (default) or "cuda".
        precision: "f32" (the default) or "bf16": the expert weights
            stored and multiplied as bf16, accumulated in f32, routing in
            f32 (vmoe-compile --precision, docs/ModelFormat.md §5).
        compiler: path of vmoe-compile (default: VMOE_COMPILE, PATH, build
            tree).
        cache: a directory for compiled libraries (default `cache_dir()`),
            or False to compile into a temporary directory removed once the
            library is loaded.
        threads: OpenMP threads of the forward pass (process-wide).
        **options: further vmoe-compile options, named as the flags with
            '_' for '-': routing="vanilla", capacity_ratio=0.5,
            max_capacity_ratio=4, group_size=16, groups_per_batch=2, k=1,
            score="sum_topk", gpu_chip="sm_80", mcpu="x86-64-v3",
            opt_level=3, ...; True/False for boolean flags.

    Raises:
        CompileError: vmoe-compile failed (the message is its error line).
        VMoEError: the compiler or the description could not be found, or
            the weights do not load.
    """
    library = compile_library(description, target=target,
                              precision=precision, compiler=compiler,
                              cache=cache, **options)
    try:
        model = Model(library, weights=weights)
    finally:
        if cache is False:
            shutil.rmtree(os.path.dirname(library), ignore_errors=True)
    if threads is not None:
        model.threads = threads
    return model
