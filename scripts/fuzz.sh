#!/usr/bin/env bash
# Builds and runs one libFuzzer target (docs/Fuzzing.md):
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#   scripts/fuzz.sh smoke SECONDS   every target from its seeds (CI)
# TARGET: safetensors, png, jpeg, manifest (the runtime's readers,
# LLVMSupport, libpng and libjpeg only), description, mlir, passes (link the
# vmoe libraries of build/: run scripts/build.sh first); importers (the
# Python checkpoint importers: python/vmoe_tools/fuzz_importers.py, plain
# Python, no build; flags are its own, e.g. --kind pth). Objects go to
# build-fuzz/, the corpus grows in build-fuzz/corpus/TARGET (seeded from
# examples/ and the tests), crashes land in build-fuzz/crashes/. Compiled
# with clang-22 -fsanitize=fuzzer,address,undefined.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${1:?usage: scripts/fuzz.sh TARGET SECONDS}"
seconds="${2:?usage: scripts/fuzz.sh TARGET SECONDS}"
shift 2
targets=(safetensors png jpeg manifest description mlir passes)
if [ "$target" = smoke ]; then
  # Seeds only (a fresh corpus folder), a generous per-input timeout for a
  # loaded CI machine; any crash, leak, timeout or Python finding fails.
  # The targets (the libFuzzer ones and the Python importers) run
  # VMOE_FUZZ_JOBS at a time (default: the number of cores).
  smoke="$root/build-fuzz/smoke"
  mkdir -p "$smoke"
  jobs="${VMOE_FUZZ_JOBS:-$(nproc)}"
  running=0
  for t in "${targets[@]}" importers; do
    if [ "$t" = importers ]; then flags=(--timeout 60); else flags=(-timeout=60); fi
    # The status is written whatever the target returns (set -e would end
    # the subshell first), and waiting never stops the loop: every target
    # runs and every failing one is reported below.
    rm -f "$smoke/$t.status"
    (status=0
     VMOE_FUZZ_OUT="$smoke" "$0" "$t" "$seconds" "${flags[@]}" \
       >"$smoke/$t.log" 2>&1 || status=$?
     echo "$status" >"$smoke/$t.status") &
    running=$(( running + 1 ))
    if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$(( running - 1 )); fi
  done
  wait || true
  failed=0
  for t in "${targets[@]}" importers; do
    log="$smoke/$t.log"
    if [ "$(cat "$smoke/$t.status" 2>/dev/null)" != 0 ]; then
      # The first error (libFuzzer's, with its stack) and the log's end.
      { grep -v "^INFO:" "$log" | head -n 25; echo "[...]"; tail -n 12 "$log"; } >&2
      echo "fuzz smoke: $t failed ($log)" >&2
      failed=1
    elif [ "$t" = importers ]; then
      echo "fuzz smoke: importers, $seconds s, $(grep -o "[0-9]* executions in" "$log" |
        grep -o "[0-9]*") executions, no finding"
    else
      echo "fuzz smoke: $t, $seconds s, $(grep -ho "number_of_executed_units: [0-9]*" "$log" |
        grep -o "[0-9]*") executions, no crash"
    fi
  done
  exit "$failed"
fi
if [ "$target" = importers ]; then
  # Python: any traceback, hang or code run by a pickle is a finding
  # (docs/Fuzzing.md); findings land in build-fuzz/importers/findings.
  cd "$root/python"
  exec /usr/bin/python3 -m vmoe_tools.fuzz_importers --seconds "$seconds" \
    --out "${VMOE_FUZZ_OUT:-$root/build-fuzz}/importers" "$@"
fi
out="${VMOE_FUZZ_OUT:-$root/build-fuzz}"
llvm=/usr/lib/llvm-22
mkdir -p "$out/corpus/$target" "$out/crashes"
flags=(-std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -I"$root/include" -I"$root/lib/Runtime"
       -I"$llvm/include")
runtime=("$root"/lib/Runtime/Formats/{ImageFile,JpegImage,Manifest,PngImage,Safetensors}.cpp
         "$root"/lib/Runtime/{BF16Panels,Preprocess}.cpp)
runtime_libs=("$llvm/lib/libLLVMSupport.a" "$llvm/lib/libLLVMDemangle.a" -lpng
              -ljpeg -lpthread -lm)
# The vmoe libraries: those of the sanitizer build when it exists (compiled
# with coverage counters, so the fuzzer is guided by the verifiers, the
# front end and the passes), else those of build/ (only the harness and the
# sources compiled here give coverage).
vmoe_build="$root/build"
instrumented=0
if [ -f "$root/build-sanitize/lib/libVMoEInit.a" ]; then
  vmoe_build="$root/build-sanitize"
  instrumented=1
fi
# Every vmoe library (dialect, front end, passes, lowerings), in any order.
frontend_libs=(-Wl,--start-group "$vmoe_build"/lib/libVMoE*.a -Wl,--end-group
               -L"$llvm/lib" -lMLIR -lLLVM -Wl,-rpath,"$llvm/lib")
seed() { # seed DIR FILES...: copies seeds once
  local dir="$1"; shift
  [ -n "$(ls -A "$dir")" ] || cp "$@" "$dir"/ 2>/dev/null || true
}
corpus="$out/corpus/$target"
case "$target" in
  safetensors)
    sources=("$root/fuzz/SafetensorsFuzzer.cpp" "${runtime[@]}")
    libs=("${runtime_libs[@]}")
    if [ -z "$(ls -A "$corpus")" ]; then
      /usr/bin/python3 "$root/test/Runtime/Inputs/make_inputs.py" weights "$corpus"
    fi ;;
  png|jpeg)
    # Seeds: the PNG files of the runtime tests, or their JPEG and PNG
    # files of odd sizes and broken JPEG files.
    harness=PngFuzzer; seeds=make_inputs.py
    [ "$target" = jpeg ] && harness=JpegFuzzer && seeds=photos.py
    sources=("$root/fuzz/$harness.cpp" "${runtime[@]}")
    libs=("${runtime_libs[@]}")
    if [ -z "$(ls -A "$corpus")" ]; then
      /usr/bin/python3 "$root/test/Runtime/Inputs/$seeds" images "$corpus"
    fi ;;
  manifest)
    sources=("$root/fuzz/ManifestFuzzer.cpp" "${runtime[@]}")
    libs=("${runtime_libs[@]}")
    seed "$corpus" "$root"/fuzz/corpus/manifest/* ;;
  description)
    sources=("$root/fuzz/DescriptionFuzzer.cpp")
    [ "$instrumented" = 1 ] ||
      sources+=("$root"/lib/Frontend/{ModelDescription,SizeLimits}.cpp)
    libs=("${frontend_libs[@]}")
    seed "$corpus" "$root"/examples/*/*.json "$root"/test/Tools/Inputs/*.json ;;
  mlir)
    sources=("$root/fuzz/MlirFuzzer.cpp")
    libs=("${frontend_libs[@]}")
    seed "$corpus" "$root"/examples/*.mlir "$root"/test/Dialect/VMoE/*.mlir ;;
  passes)
    sources=("$root/fuzz/PassesFuzzer.cpp")
    libs=("${frontend_libs[@]}")
    seed "$corpus" "$root"/examples/*.mlir \
      "$root"/test/Dialect/VMoE/Transforms/*.mlir \
      "$root"/test/Conversion/VMoEToSCF/*.mlir ;;
  *) echo "unknown target '$target' (${targets[*]}, smoke)" >&2
     exit 2 ;;
esac
binary="$out/$target-fuzzer"
extra=()
[[ "$target" == description || "$target" == mlir || "$target" == passes ]] &&
  extra=(-I"$vmoe_build/include")
clang++-22 "${flags[@]}" "${extra[@]}" "${sources[@]}" "${libs[@]}" -o "$binary"
dict=()
[[ "$target" == safetensors || "$target" == manifest || "$target" == description ]] &&
  dict=(-dict="$root/fuzz/json.dict")
# allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons slabs in the
# instrumented code and unpoisons allocations only there; libMLIR.so's
# allocations from such slabs would read as poisoned (a false report).
ASAN_OPTIONS="${ASAN_OPTIONS:-allow_user_poisoning=0}" \
"$binary" "$corpus" "${dict[@]}" -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=4096 -artifact_prefix="$out/crashes/$target-" -print_final_stats=1 "$@"
