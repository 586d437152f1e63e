#!/usr/bin/env bash
# Optional: a venv with PyTorch 2.x from PyPI and JAX (XLA:CPU) for the
# peer rows of bench/moe_layer_bench.py (tutel-style layer eager and under
# torch.compile; bench/jax_moe.py jitted). Several GB; never needed by CI
# or the tests.
#   scripts/bench_peers.sh [DIR]          (default build/peers)
# then: /usr/bin/python3 bench/moe_layer_bench.py --peer-python DIR/bin/python
#   (or export VMOE_PEER_PYTHON=DIR/bin/python)
# Tries the CPU-only wheel index of download.pytorch.org first (~200 MB);
# where that host is unreachable, falls back to the default PyPI wheel,
# which also pulls the CUDA libraries (~3 GB) although the rows run on the
# CPU. torch.compile needs a C compiler (clang-22 or gcc) at run time.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/build/peers}"
/usr/bin/python3 -m venv "$dir"
"$dir/bin/pip" install -q --upgrade pip
if ! "$dir/bin/pip" install -q --timeout 30 "torch>=2,<3" \
    --index-url https://download.pytorch.org/whl/cpu; then
  echo "bench_peers: the CPU wheel index is unreachable; installing torch" \
       "from PyPI (with its CUDA dependencies, several GB)" >&2
  "$dir/bin/pip" install -q "torch>=2,<3"
fi
"$dir/bin/pip" install -q numpy "jax[cpu]"
"$dir/bin/python" -c 'import torch; print("torch", torch.__version__)'
"$dir/bin/python" -c 'import jax; print("jax", jax.__version__)'
echo "export VMOE_PEER_PYTHON=$dir/bin/python"
