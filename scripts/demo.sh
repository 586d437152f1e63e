#!/usr/bin/env bash
# The main job: installs the Debian packages, builds vmoe, then runs the
# example V-MoE layer through vmoe-opt (buffer sizing) and prints the result.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${VMOE_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh" >&2
"$root/scripts/build.sh" vmoe-opt >&2
"$build/bin/vmoe-opt" "$root/examples/moe_layer.mlir" --vmoe-buffer-sizing
