#!/usr/bin/env bash
# Builds and runs one libFuzzer target (docs/Fuzzing.md):
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
# TARGET: safetensors, png, manifest (the runtime's readers, LLVMSupport and
# libpng only), description, mlir (link the vmoe libraries of build/: run
# scripts/build.sh first). Objects go to build-fuzz/, the corpus grows in
# build-fuzz/corpus/TARGET (seeded from examples/ and the tests), crashes
# land in build-fuzz/crashes/. Compiled with clang-22
# -fsanitize=fuzzer,address,undefined.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${1:?usage: scripts/fuzz.sh TARGET SECONDS}"
seconds="${2:?usage: scripts/fuzz.sh TARGET SECONDS}"
shift 2
out="$root/build-fuzz"
llvm=/usr/lib/llvm-22
mkdir -p "$out/corpus/$target" "$out/crashes"
flags=(-std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -I"$root/include" -I"$root/lib/Runtime"
       -I"$llvm/include")
runtime=("$root"/lib/Runtime/Formats/{Manifest,PngImage,Safetensors}.cpp)
runtime_libs=("$llvm/lib/libLLVMSupport.a" "$llvm/lib/libLLVMDemangle.a" -lpng
              -lpthread -lm)
frontend_libs=(-L"$root/build/lib" -lVMoEFrontend -lVMoEUtils -lVMoEDialect
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
  png)
    sources=("$root/fuzz/PngFuzzer.cpp" "${runtime[@]}")
    libs=("${runtime_libs[@]}")
    if [ -z "$(ls -A "$corpus")" ]; then
      /usr/bin/python3 "$root/test/Runtime/Inputs/make_inputs.py" images "$corpus"
    fi ;;
  manifest)
    sources=("$root/fuzz/ManifestFuzzer.cpp" "${runtime[@]}")
    libs=("${runtime_libs[@]}")
    seed "$corpus" "$root"/fuzz/corpus/manifest/* ;;
  description)
    sources=("$root/fuzz/DescriptionFuzzer.cpp"
             "$root"/lib/Frontend/{ModelDescription,SizeLimits}.cpp)
    libs=("${frontend_libs[@]}")
    seed "$corpus" "$root"/examples/*/*.json "$root"/test/Tools/Inputs/*.json ;;
  mlir)
    sources=("$root/fuzz/MlirFuzzer.cpp")
    libs=("${frontend_libs[@]}")
    seed "$corpus" "$root"/examples/*.mlir "$root"/test/Dialect/VMoE/*.mlir ;;
  *) echo "unknown target '$target' (safetensors, png, manifest, description, mlir)" >&2
     exit 2 ;;
esac
binary="$out/$target-fuzzer"
extra=()
[[ "$target" == description || "$target" == mlir ]] && extra=(-I"$root/build/include")
clang++-22 "${flags[@]}" "${extra[@]}" "${sources[@]}" "${libs[@]}" -o "$binary"
dict=()
[[ "$target" == safetensors || "$target" == manifest || "$target" == description ]] &&
  dict=(-dict="$root/fuzz/json.dict")
"$binary" "$corpus" "${dict[@]}" -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=4096 -artifact_prefix="$out/crashes/$target-" -print_final_stats=1 "$@"
