#!/usr/bin/env bash
# GPU checks for a machine that has a GPU but no LLVM/MLIR and no clang (the
# lent device machines: CUDA toolkit, a python3 on PATH with torch and numpy).
# Two steps:
#
#   scripts/device_check.sh prepare   # here, after scripts/build.sh:
#       builds the bundle build/device/ (~20 MB): the layer matrix lowered
#       with vmoe-lower-to-nvvm and linked (check_layers --build-only), the
#       bench layers of bench/gpu_layer_bench.py, the dense and attention
#       GEMM cases of vmoe_tools/check_contractions in the three GEMM modes,
#       the digits model for --target=cuda and its CPU logits, and the
#       shared libraries the
#       executables need beyond libc. test/Integration/GPU/device-check-
#       prepare.test runs it in check-vmoe.
#   scripts/device_check.sh run       # on the GPU machine, with build/device:
#       1. the layer matrix on the GPU against the PyTorch reference, and
#          the dense and attention GEMMs (SIMT, TF32, bf16) against PyTorch
#          in float64;
#       2. the digits model on the GPU against the CPU logits (1e-4), and its
#          images/s;
#       3. the MoE layers of bench/ (V-MoE-S/32 with 1 and 4 groups, B-size)
#          compiled for the GPU in each GEMM mode (SIMT FP32, TF32 and bf16
#          mma.sync), checked against PyTorch, next to cuBLAS FP32, TF32 and bf16 (bench/cuda/cublas_roofline.cu,
#          built there with nvcc while step 1 runs);
#       then one table of all results. Every step has a time limit; the whole
#       run stays under 8 minutes.
#
# With the device tool: run(command="scripts/device_check.sh run",
# carry=["build/device"], timeout_s=540).
#   VMOE_DEVICE_BUNDLE  the bundle folder (default: build/device)
#   VMOE_PYTHON         the python with torch (prepare: /usr/bin/python3 if
#                       present; run: python3 on PATH, the device's own)
#   VMOE_GPU_CHIP       CUDA architecture (default: sm_90)
#   VMOE_BIN_DIR        prepare: where vmoe-opt and vmoe-compile are
#                       (default: build/bin)
#   VMOE_DEVICE_SCOPE   prepare: full (default) builds every case of the
#                       layer matrix and every bench layer; smoke (what
#                       check-vmoe runs) the smoke subset and s32-g1 SIMT
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bundle="${VMOE_DEVICE_BUNDLE:-$root/build/device}"
chip="${VMOE_GPU_CHIP:-sm_90}"

prepare() {
  set -e
  local py="${VMOE_PYTHON:-/usr/bin/python3}"
  [ -x "$py" ] || py=python3
  local bin="${VMOE_BIN_DIR:-$root/build/bin}"
  [ -x "$bin/vmoe-compile" ] || { echo "device_check: build first (scripts/build.sh)" >&2; exit 1; }
  local scope="${VMOE_DEVICE_SCOPE:-full}" sizes=()
  [ "$scope" = full ] || sizes=(--sizes s32-g1 --mma none)
  rm -rf "$bundle" && mkdir -p "$bundle/lib"
  (cd "$root/python" && "$py" -m vmoe_tools.check_layers \
    --vmoe-opt "$bin/vmoe-opt" --target cuda --gpu-chip "$chip" \
    --scope "$scope" --build-only --workdir "$bundle/cases") | tail -1
  local mode
  for mode in none tf32 bf16; do
    (cd "$root/python" && "$py" -m vmoe_tools.check_contractions \
      --vmoe-opt "$bin/vmoe-opt" --gpu --gpu-chip "$chip" --gpu-mma "$mode" \
      --build-only --workdir "$bundle/contractions") | tail -1
  done
  # Only what the run needs travels.
  find "$bundle/cases" "$bundle/contractions" \( -name '*.ll' -o -name '*.mlir' \) -delete
  "$py" "$root/bench/gpu_layer_bench.py" build --out "$bundle/layers" \
    --chip "$chip" --vmoe-opt "$bin/vmoe-opt" "${sizes[@]}"
  local model="$root/examples/digits/digits.json"
  "$bin/vmoe-compile" "$model" --target=cuda --gpu-chip="$chip" \
    --mcpu=x86-64-v2 -o "$bundle/digits-cuda"
  "$bin/vmoe-compile" "$model" -o "$bundle/digits-cpu"
  "$bundle/digits-cpu" --weights "$root/examples/digits/digits.safetensors" \
    --image-list "$root/examples/digits/test/labels.txt" --print-logits \
    --quiet >"$bundle/cpu-logits.txt"
  rm "$bundle/digits-cpu"
  for lib in $(ldd "$bundle/digits-cuda" | awk '/=> \// {print $3}'); do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++*|libgcc_s*|libdl.so*|libpthread.so*) ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
  # The device tool carries at most 64 MiB with the working tree.
  local kb
  kb=$(du -sk "$bundle" | cut -f1)
  echo "device_check: bundle $bundle: $(( kb / 1024 )) MiB"
  [ "$kb" -lt $(( 48 * 1024 )) ] || { echo "device_check: bundle over 48 MiB" >&2; exit 1; }
}

# Rows of the final table: "step|result|detail".
rows=()
row() { rows+=("$1|$2|$3"); }

run() {
  [ -d "$bundle/cases" ] || { echo "device_check: no bundle; run 'prepare' on the build machine" >&2; exit 1; }
  local py="${VMOE_PYTHON:-python3}"
  local start=$SECONDS status=0 out="$bundle/out"
  mkdir -p "$out"
  nvidia-smi -L || true
  "$py" -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)' \
    || { echo "device_check: $py lacks torch or numpy" >&2; exit 1; }

  # cuBLAS reference, built in the background while the matrix runs.
  local cublas="$out/cublas_roofline"
  ( command -v nvcc >/dev/null || PATH="/usr/local/cuda/bin:$PATH"
    timeout 180 nvcc -O3 -arch="$chip" "$root/bench/cuda/cublas_roofline.cu" \
      -lcublas -o "$cublas" ) >"$out/nvcc.log" 2>&1 &
  local nvcc_pid=$!

  echo "== 1. layer matrix on the GPU vs PyTorch"
  if (cd "$root/python" && timeout 240 "$py" -m vmoe_tools.check_layers \
        --target cuda --prebuilt --workdir "$bundle/cases") | tee "$out/matrix.txt"; then
    row "layer matrix vs PyTorch" PASS "$(tail -1 "$out/matrix.txt")"
  else
    status=1
    row "layer matrix vs PyTorch" FAIL "$(grep -m1 -E 'FAIL|ERROR|error' "$out/matrix.txt" || tail -1 "$out/matrix.txt")"
  fi

  echo "== 1b. dense and attention GEMMs on the GPU vs PyTorch (float64)"
  local mode rtol
  for mode in none tf32 bf16; do
    case "$mode" in none) rtol=1e-6 ;; tf32) rtol=2e-3 ;; bf16) rtol=1e-2 ;; esac
    if (cd "$root/python" && timeout 60 "$py" -m vmoe_tools.check_contractions \
          --gpu --prebuilt --gpu-mma "$mode" --rtol "$rtol" \
          --workdir "$bundle/contractions") | tee "$out/contractions-$mode.txt"; then
      row "dense GEMMs ($mode) vs PyTorch" PASS "$(tail -1 "$out/contractions-$mode.txt")"
    else
      status=1
      row "dense GEMMs ($mode) vs PyTorch" FAIL "$(grep -m1 -E 'FAIL|error|cannot' "$out/contractions-$mode.txt" || tail -1 "$out/contractions-$mode.txt")"
    fi
  done

  echo "== 2. digits model on the GPU vs the CPU logits"
  export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local digits=("$bundle/digits-cuda" --weights "$root/examples/digits/digits.safetensors"
    --image-list "$root/examples/digits/test/labels.txt")
  if timeout 60 "${digits[@]}" --print-logits --quiet >"$out/gpu-logits.txt" 2>"$out/digits.err"; then
    local diff
    if diff=$(cd "$root/python" && "$py" -m vmoe_tools.compare_logits \
        "$bundle/cpu-logits.txt" "$out/gpu-logits.txt" --atol 1e-4
    ); then row "digits GPU vs CPU logits" PASS "$diff"
    else row "digits GPU vs CPU logits" FAIL "$diff"; status=1; fi
    echo "$diff"
    local speed
    speed=$(timeout 60 "${digits[@]}" --quiet --bench 20 2>&1 | tail -1)
    echo "$speed"
    row "digits images/s" "$([ -n "$speed" ] && echo INFO || echo FAIL)" "$speed"
  else
    status=1
    row "digits GPU vs CPU logits" FAIL "$(head -1 "$out/digits.err")"
  fi

  echo "== 3. MoE layers on the GPU vs cuBLAS"
  wait "$nvcc_pid"
  local cublas_args=()
  if [ -x "$cublas" ]; then
    cublas_args=(--cublas "$cublas")
  else
    status=1
    row "cuBLAS build (nvcc)" FAIL "$(head -1 "$out/nvcc.log")"
  fi
  local left=$(( 470 - (SECONDS - start) ))
  [ "$left" -gt 30 ] || left=30
  if timeout "$left" "$py" "$root/bench/gpu_layer_bench.py" run --dir "$bundle/layers" \
      --repeats 10 "${cublas_args[@]}" 2>&1 | tee "$out/bench.txt"; then
    row "bench layers vs PyTorch" PASS "see the table above (ms)"
  else
    status=1
    row "bench layers vs PyTorch" FAIL "$(grep -m1 -E 'FAIL|error|gpu_layer_bench:' "$out/bench.txt" || echo "exit status or timeout")"
  fi

  echo
  echo "== device check summary ($(( SECONDS - start )) s)"
  printf '%-28s %-6s %s\n' step result detail
  local r
  for r in "${rows[@]}"; do
    IFS='|' read -r step result detail <<<"$r"
    printf '%-28s %-6s %s\n' "$step" "$result" "$detail"
  done
  exit "$status"
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: scripts/device_check.sh prepare|run" >&2; exit 2 ;;
esac
