#!/usr/bin/env bash
# The main job: installs the Debian packages, builds vmoe, compiles the
# example V-MoE model (examples/digits) into an executable and classifies
# its 360 test images, printing a few predictions, the accuracy, the
# experts' load and the throughput; then again at a lower capacity ratio,
# where Batch Prioritized Routing drops the least confident tokens.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${VMOE_BUILD_DIR:-$root/build}"
model="$root/examples/digits"
"$root/scripts/setup.sh" >&2
"$root/scripts/build.sh" vmoe-compile >&2

mkdir -p "$build/demo"
echo "== vmoe-compile examples/digits/digits.json -> build/demo/digits"
"$build/bin/vmoe-compile" "$model/digits.json" -o "$build/demo/digits"

run() {
  "$build/demo/digits" --weights "$model/digits.safetensors" \
    --image-list "$model/test/labels.txt" "$@"
}
echo "== classify the test images (capacity ratio from the model: 1.05)"
run --stats --bench 5 | awk '/\.png: / && ++n == 11 { print "..." } /\.png: / && n > 10 { next } 1'
echo "== the same executable at capacity ratio 0.5 (half the expert compute)"
run --capacity-ratio 0.5 --quiet --stats
