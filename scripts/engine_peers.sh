#!/usr/bin/env bash
# Optional: a venv with the deployment engines that bench/engine_peers.py
# times next to vmoe: ONNX Runtime, OpenVINO and IREE (compiler with
# iree-import-onnx, and runtime), with onnx and numpy. About 900 MB from
# PyPI; never needed by CI or the tests. No PyTorch: the ONNX model is
# exported by Debian's torch under /usr/bin/python3.
#   scripts/engine_peers.sh [DIR]          (default build/engine-peers)
# then: /usr/bin/python3 bench/engine_peers.py --peer-python DIR/bin/python
#   (or export VMOE_ENGINE_PYTHON=DIR/bin/python)
# A package that fails to install is reported and left out; its rows then
# say so and the others still run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/build/engine-peers}"
/usr/bin/python3 -m venv "$dir"
"$dir/bin/pip" install -q --upgrade pip
"$dir/bin/pip" install -q numpy onnx
for package in onnxruntime openvino iree-base-compiler iree-base-runtime; do
  if ! "$dir/bin/pip" install -q "$package"; then
    echo "engine_peers: $package did not install; its rows will say so" >&2
  fi
done
"$dir/bin/python" - <<'PY'
import importlib
for module, name in (("onnx", "onnx"), ("onnxruntime", "onnxruntime"),
                     ("openvino", "openvino"),
                     ("iree.compiler", "iree-base-compiler"),
                     ("iree.runtime", "iree-base-runtime")):
    try:
        m = importlib.import_module(module)
        version = getattr(m, "__version__", None)
        if version is None:
            from importlib.metadata import version as v
            version = v(name)
        print(f"{name} {version}")
    except Exception as err:
        print(f"{name}: not usable ({type(err).__name__}: {err})")
PY
echo "export VMOE_ENGINE_PYTHON=$dir/bin/python"
