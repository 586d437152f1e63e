#!/usr/bin/env bash
# Installs every Debian package vmoe needs to build, test and run its demo.
# Idempotent: packages already installed are skipped, and apt runs only when
# something is missing. LLVM/MLIR 22 come from Debian 12's security suite.
set -euo pipefail

PACKAGES=(
  cmake ninja-build ccache                       # build
  clang-22 lld-22                                # compiler, linker for models
  llvm-22-dev llvm-22-tools                      # LLVM, FileCheck, lit, not
  libmlir-22-dev mlir-22-tools                   # MLIR, mlir-opt, mlir-runner
  libomp-22-dev                                  # OpenMP runtime of models
  libpng-dev libjpeg62-turbo-dev                 # PNG and JPEG input of models
  python3-pil                                    # JPEG test images (tests)
  python3-torch python3-numpy                    # numerical reference
  python3-msgpack                                # Flax checkpoints (importers)
  python3-pip python3-venv python3-setuptools    # pip install ./python
  libopenblas0-pthread                           # fast BLAS for torch (bench/)
  python3-sklearn python3-matplotlib             # digits data set, plots
  openmpi-bin libopenmpi-dev                     # expert parallelism (MPI)
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null |
      grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} Debian packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
