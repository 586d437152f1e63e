#!/usr/bin/env bash
# Configures (once) and builds vmoe with clang-22 and Ninja.
#   VMOE_BUILD_DIR  build folder (default: build)
#   VMOE_BUILD_TYPE CMake build type (default: Release)
#   VMOE_JOBS       parallel jobs (default: number of cores)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${VMOE_BUILD_DIR:-$root/build}"
jobs="${VMOE_JOBS:-$(nproc)}"

if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE="${VMOE_BUILD_TYPE:-Release}" \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
ninja -C "$build" -j "$jobs" "$@"
