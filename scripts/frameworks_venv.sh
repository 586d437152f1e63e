#!/usr/bin/env bash
# Optional: Pythons with the real timm and Flax for the importer checks
# against checkpoints those libraries write (test/Integration/CPU/
# importers-{timm,flax}-real.test). Never needed by CI: without them the
# two tests are UNSUPPORTED.
#   scripts/frameworks_venv.sh [DIR]      (default build/frameworks)
# then: export VMOE_TIMM_PYTHON=DIR/timm/bin/python
#       export VMOE_FLAX_PYTHON=DIR/flax/bin/python
# Google's V-MoE and ViT code (importers-vmoe-real.test: their models and
# vmoe's partitioned checkpoint writer) is not on PyPI: give clones of
# github.com/google-research/vmoe and .../vision_transformer with
#       export VMOE_SOURCE=/path/to/vmoe VIT_JAX_SOURCE=/path/to/vision_transformer
# (the flax venv gets absl-py, which they import; without TensorFlow the
# check reads and writes files through a local stand-in for its gfile).
# timm reuses Debian's torch 1.13 (+ python3-torchvision, which this
# installs) and needs numpy < 2; jax/flax want numpy 2: two venvs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/build/frameworks}"
apt-get install -y -q python3-torchvision
/usr/bin/python3 -m venv --system-site-packages "$dir/timm"
"$dir/timm/bin/pip" install -q --no-deps "timm==0.9.16"
"$dir/timm/bin/pip" install -q pyyaml "huggingface_hub<0.25" \
  "safetensors<0.5" "numpy<2"
/usr/bin/python3 -m venv --system-site-packages "$dir/flax"
"$dir/flax/bin/pip" install -q flax absl-py
echo "export VMOE_TIMM_PYTHON=$dir/timm/bin/python"
echo "export VMOE_FLAX_PYTHON=$dir/flax/bin/python"
