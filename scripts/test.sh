#!/usr/bin/env bash
# The whole test suite from a fresh checkout: installs the Debian packages,
# builds, runs check-vmoe (lit: dialect, passes, tools, plugin and the
# executed integration tests against the PyTorch reference), then a short
# smoke run of every fuzz target.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
# MPI tests must run, not be skipped (lit fails without mpirun).
VMOE_REQUIRE_MPI=1 "$root/scripts/build.sh" check-vmoe
# Fuzz smoke: every libFuzzer target 30 s from its seeds (docs/Fuzzing.md).
"$root/scripts/fuzz.sh" smoke 30
