#!/usr/bin/env bash
# GPU checks for a machine that has a GPU but no LLVM/MLIR (the lent device
# machines: CUDA toolkit, torch, numpy; no libMLIR). Two steps:
#
#   scripts/device_check.sh prepare   # here, after scripts/build.sh:
#       builds the bundle build/device/ (~15 MB): the 48-case layer matrix
#       lowered with vmoe-lower-to-nvvm and linked (check_layers --build-only),
#       the digits model for --target=cuda and its CPU logits, and the shared
#       libraries the executables need beyond libc.
#   scripts/device_check.sh run       # on the GPU machine, with build/device:
#       1. the layer matrix on the GPU against the PyTorch reference (1e-5);
#       2. the digits model on the GPU against the CPU logits (1e-4) and its
#          images/s (--bench);
#       3. the MoE layers of bench/ (V-MoE-S/32 with 1 and 4 groups, B-size)
#          compiled for the GPU: median ms, checked against PyTorch, next to
#          the cuBLAS roofline of bench/cuda (built with nvcc there).
#
# With the device tool: run(command="scripts/device_check.sh run",
# carry=["build/device"], timeout_s=420).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bundle="$root/build/device"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
chip="${VMOE_GPU_CHIP:-sm_90}"

prepare() {
  local bin="$root/build/bin"
  [ -x "$bin/vmoe-compile" ] || { echo "device_check: build first (scripts/build.sh)" >&2; exit 1; }
  rm -rf "$bundle" && mkdir -p "$bundle/lib"
  (cd "$root/python" && "$py" -m vmoe_tools.check_layers \
    --vmoe-opt "$bin/vmoe-opt" --target cuda --gpu-chip "$chip" \
    --build-only --workdir "$bundle/cases") | tail -1
  # Only what the run needs travels.
  find "$bundle/cases" \( -name '*.ll' -o -name '*.mlir' \) -delete
  "$py" "$root/bench/gpu_layer_bench.py" build --out "$bundle/layers" --chip "$chip"
  local model="$root/examples/digits/digits.json"
  "$bin/vmoe-compile" "$model" --target=cuda --gpu-chip="$chip" \
    --mcpu=x86-64-v2 -o "$bundle/digits-cuda"
  "$bin/vmoe-compile" "$model" -o "$bundle/digits-cpu"
  "$bundle/digits-cpu" --weights "$root/examples/digits/digits.safetensors" \
    --image-list "$root/examples/digits/test/labels.txt" --print-logits \
    --quiet >"$bundle/cpu-logits.txt"
  for lib in $(ldd "$bundle/digits-cuda" | awk '/=> \// {print $3}'); do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++*|libgcc_s*) ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
  du -sh "$bundle"
}

run() {
  [ -d "$bundle/cases" ] || { echo "device_check: no bundle; run 'prepare' on the build machine" >&2; exit 1; }
  nvidia-smi -L || true
  local status=0
  echo "== 1. layer matrix on the GPU"
  (cd "$root/python" && "$py" -m vmoe_tools.check_layers --target cuda \
    --prebuilt --workdir "$bundle/cases") || status=1
  echo "== 2. digits model on the GPU"
  export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local digits=("$bundle/digits-cuda" --weights "$root/examples/digits/digits.safetensors"
    --image-list "$root/examples/digits/test/labels.txt")
  if "${digits[@]}" --print-logits --quiet >"$bundle/gpu-logits.txt"; then
    "$py" - "$bundle/cpu-logits.txt" "$bundle/gpu-logits.txt" <<'EOF' || status=1
import sys
import numpy as np
cpu, gpu = ([[float(v) for v in line.split(": logits ")[1].split()]
             for line in open(path)] for path in sys.argv[1:])
diff = np.abs(np.array(cpu) - np.array(gpu)).max()
print(f"GPU vs CPU logits: {len(gpu)} images, max |diff| {diff:.2e}")
sys.exit(0 if len(cpu) == len(gpu) and diff <= 1e-4 else 1)
EOF
    "${digits[@]}" --quiet --bench 20 || status=1
  else
    status=1
  fi
  echo "== 3. MoE layers on the GPU vs the cuBLAS roofline"
  local cublas=()
  if command -v nvcc >/dev/null && nvcc -O3 -arch="$chip" \
      "$root/bench/cuda/cublas_roofline.cu" -lcublas -o "$bundle/cublas_roofline"; then
    cublas=(--cublas "$bundle/cublas_roofline")
  else
    echo "nvcc failed or missing: no cuBLAS rows"; status=1
  fi
  "$py" "$root/bench/gpu_layer_bench.py" run --dir "$bundle/layers" "${cublas[@]}" || status=1
  exit "$status"
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: scripts/device_check.sh prepare|run" >&2; exit 2 ;;
esac
