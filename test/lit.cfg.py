# -*- Python -*-
"""lit configuration of the vmoe regression suite (check-vmoe)."""

import os
import shlex
import shutil
import subprocess

import lit.formats
import lit.util
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "VMOE"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "README.md"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.vmoe_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%shlibext", config.llvm_shlib_ext))
config.substitutions.append(("%vmoe_src_root", config.vmoe_src_root))
config.substitutions.append(("%vmoe_obj_root", config.vmoe_obj_root))
config.substitutions.append(("%vmoe_lib_dir", config.vmoe_lib_dir))
config.substitutions.append(("%vmoe_tools_dir", config.vmoe_tools_dir))

llvm_config.use_default_substitutions()

# A sanitizer build (VMOE_SANITIZE, docs/Fuzzing.md): every process gets
# ASan's shared runtime preloaded, so that instrumented libraries loaded by
# uninstrumented hosts (Python's ctypes, C programs, mlir-runner) work; any
# report fails its test. Leak checks are off: the uninstrumented programs
# the tests run (Python, clang) would report theirs. User poisoning is off:
# LLVM's BumpPtrAllocator poisons its slabs in instrumented code and
# unpoisons allocations only there, so memory handed out by libMLIR.so
# (uninstrumented) from a slab our code started reads as poisoned.
if config.vmoe_sanitizer_runtime:
    config.available_features.add("sanitize")
    config.environment["LD_PRELOAD"] = config.vmoe_sanitizer_runtime
    config.environment["ASAN_OPTIONS"] = (
        "detect_leaks=0:abort_on_error=0:exitcode=86:"
        "allocator_may_return_null=1:allow_user_poisoning=0")
    config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# check-vmoe-full (lit --param vmoe_full=1, or VMOE_TEST_FULL=1): the heavy
# variants too (docs/Testing.md). %vmoe_scope is the case scope of the
# matrix tools' secondary pipelines: smoke by default, full there.
full = (lit_config.params.get("vmoe_full") == "1"
        or os.environ.get("VMOE_TEST_FULL") == "1")
if full:
    config.available_features.add("vmoe-full")
config.substitutions.append(("%vmoe_scope", "full" if full else "smoke"))
# A filter for image lists of whole-model runs whose extra images add no
# coverage (the same kernels on more data): the first 40 lines in
# check-vmoe, every line in check-vmoe-full.
config.substitutions.append(("%vmoe_sample_lines",
                             "cat" if full else "head -n 40"))
# Compiled case libraries keyed by their lowered MLIR (check_layers --cache),
# shared by the tests and kept between runs.
config.substitutions.append(
    ("%vmoe_case_cache", os.path.join(config.vmoe_obj_root, "test",
                                      "case-cache")))

# The reference and golden-data generators need Debian's python3-torch, which
# lives under /usr/bin/python3 (a python earlier on PATH may lack it).
reference_python = "/usr/bin/python3"
config.substitutions.append(("%vmoe_torch_python", reference_python))
config.substitutions.append(
    ("%vmoe_python_path", os.path.join(config.vmoe_src_root, "python")))


def _python_has(module):
    try:
        return (
            subprocess.run(
                [reference_python, "-c", "import " + module],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=120,
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


if _python_has("torch"):
    config.available_features.add("torch")

# The host runs vdpbf16ps (--precision=bf16 models compiled for it use it)
# and 16-lane AVX-512 code.
try:
    with open("/proc/cpuinfo") as cpuinfo:
        flags = cpuinfo.read()
        if " avx512_bf16" in flags:
            config.available_features.add("avx512bf16")
        if " avx512f" in flags:
            config.available_features.add("avx512f")
except OSError:
    pass

# Optional: Pythons with the real timm / Flax (scripts/frameworks_venv.sh)
# for the importer checks on checkpoints those libraries write.
for feature, variable in (("timm", "VMOE_TIMM_PYTHON"),
                          ("flax", "VMOE_FLAX_PYTHON")):
    python = os.environ.get(variable)
    if python and os.path.exists(python):
        try:
            if subprocess.run([python, "-c", "import " + feature],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL,
                              timeout=300).returncode == 0:
                config.available_features.add(feature)
                config.substitutions.append(
                    ("%vmoe_" + feature + "_python", python))
        except (OSError, subprocess.TimeoutExpired):
            pass

# Optional: clones of Google's vmoe and vision_transformer (VMOE_SOURCE,
# VIT_JAX_SOURCE) for the Flax importer against their models and their
# checkpoint writer, in the Flax Python.
_vmoe_source = os.environ.get("VMOE_SOURCE", "")
_vit_jax_source = os.environ.get("VIT_JAX_SOURCE", "")
if "flax" in config.available_features and os.path.isfile(
        os.path.join(_vmoe_source, "vmoe", "checkpoints", "partitioned.py")
) and os.path.isfile(os.path.join(_vit_jax_source, "vit_jax",
                                  "models_vit.py")):
    config.available_features.add("vmoe-source")
    config.environment["VMOE_SOURCE"] = _vmoe_source
    config.environment["VIT_JAX_SOURCE"] = _vit_jax_source

# GPU tests run only where a CUDA device answers.
if shutil.which("nvidia-smi"):
    try:
        if subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=30).returncode == 0:
            config.available_features.add("cuda-gpu")
    except (OSError, subprocess.TimeoutExpired):
        pass
if os.path.exists("/usr/local/cuda/bin/ptxas"):
    config.available_features.add("ptxas")

tool_dirs = [config.vmoe_tools_dir, config.llvm_tools_dir]
tools = [
    "vmoe-opt",
    "vmoe-translate",
    "vmoe-compile",
    ToolSubst("llvm-nm", unresolved="fatal"),
    ToolSubst("split-file", unresolved="fatal"),
    ToolSubst("mlir-opt", unresolved="fatal"),
    ToolSubst("mlir-runner", unresolved="fatal"),
    ToolSubst("mlir-translate", unresolved="fatal"),
    ToolSubst("%clang", command="clang-22", unresolved="fatal"),
]
llvm_config.add_tool_substitutions(tools, tool_dirs)

config.substitutions.append(
    ("%mlir_runner_utils",
     os.path.join(config.mlir_lib_dir, "libmlir_runner_utils" + config.llvm_shlib_ext)))
config.substitutions.append(
    ("%mlir_c_runner_utils",
     os.path.join(config.mlir_lib_dir, "libmlir_c_runner_utils" + config.llvm_shlib_ext)))
config.substitutions.append(
    ("%vmoe_plugin", os.path.join(config.vmoe_lib_dir, "VMoEPlugin" + config.llvm_shlib_ext)))

# Expert parallel executables run under mpirun (test/Integration/MPI): the
# feature needs mpirun and a build with the MPI runtime. With
# VMOE_REQUIRE_MPI=1 (scripts/test.sh, CI) a missing MPI fails the suite
# instead of reporting those tests unsupported.
_mpirun = shutil.which("mpirun")
_mpi_link = os.path.join(config.vmoe_lib_dir, "vmoe_mpi_runtime.link")
if _mpirun and os.path.exists(_mpi_link):
    config.available_features.add("mpi")
    # Root in containers, more ranks than cores, shared memory only.
    config.substitutions.append(
        ("%mpirun",
         _mpirun + " --allow-run-as-root --oversubscribe --mca btl self,vader"
         " --bind-to none --mca mpi_yield_when_idle 1"))
elif os.environ.get("VMOE_REQUIRE_MPI") == "1":
    lit_config.fatal("VMOE_REQUIRE_MPI=1 but " +
                     ("the build has no MPI runtime (" + _mpi_link + ")"
                      if _mpirun else "mpirun is not installed") +
                     ": run scripts/setup.sh and reconfigure")



def _link_args(name):
    """The arguments of build/lib/NAME (one per line, '#' comments) as one
    quoted string, or None when the file does not exist."""
    path = os.path.join(config.vmoe_lib_dir, name)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return " ".join(shlex.quote(line.strip()) for line in f
                        if line.strip() and not line.startswith("#"))


# build/lib/vmoe_cuda_runtime.link, written by lib/Runtime/CUDA/CMakeLists.txt
# when the CUDA runtime is built, lists the link arguments a model running
# on the GPU adds to those of vmoe_runtime.link; %vmoe_cuda_runtime_link
# expands to them. The GPU emulator (lib/Runtime/GPUEmulator, built with the
# CUDA runtime) runs GPU-target layers and models on this CPU;
# %vmoe_gpu_emulator_link expands to its link arguments (after the
# runtime's).
_cuda_args = _link_args("vmoe_cuda_runtime.link")
if _cuda_args is not None:
    config.substitutions.append(("%vmoe_cuda_runtime_link", _cuda_args))
_emulator_args = _link_args("vmoe_gpu_emulator.link")
if _emulator_args is not None:
    config.available_features.add("gpu-emulator")
    config.substitutions.append(("%vmoe_gpu_emulator_link", _emulator_args))
