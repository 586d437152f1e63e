#!/usr/bin/env bash
# Configures (once) and builds vmoe with clang-22 and Ninja.
#   VMOE_BUILD_DIR  build folder (default: build)
#   VMOE_BUILD_TYPE CMake build type (default: Release)
#   VMOE_JOBS       parallel jobs (default: number of cores)
#   --sanitize      ASan + UBSan build in build-sanitize/ (VMOE_SANITIZE=ON;
#                   docs/Fuzzing.md)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
sanitize=OFF
if [ "${1:-}" = "--sanitize" ]; then
  sanitize=ON
  shift
  : "${VMOE_BUILD_DIR:=$root/build-sanitize}"
fi
build="${VMOE_BUILD_DIR:-$root/build}"
jobs="${VMOE_JOBS:-$(nproc)}"

if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE="${VMOE_BUILD_TYPE:-Release}" \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DVMOE_SANITIZE="$sanitize"
fi
ninja -C "$build" -j "$jobs" "$@"
