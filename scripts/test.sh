#!/usr/bin/env bash
# The whole test suite from a fresh checkout: installs the Debian packages,
# builds, runs check-vmoe (lit: dialect, passes, tools, plugin and the
# executed integration tests against the PyTorch reference), then a short
# smoke run of every fuzz target.
#   scripts/test.sh          what CI runs (docs/Testing.md: times)
#   scripts/test.sh --full   check-vmoe-full instead: every case of every
#                            matrix in every mode, MPI at np 1, 2 and 4,
#                            whole image sets (run it before a stop that
#                            touches what it covers)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
suite=check-vmoe
case "${1:-}" in
  "") ;;
  --full) suite=check-vmoe-full ;;
  *) echo "usage: scripts/test.sh [--full]" >&2; exit 2 ;;
esac
stamp() { echo "test.sh: $1 at $(( SECONDS / 60 )) min $(( SECONDS % 60 )) s"; }
"$root/scripts/setup.sh"
stamp "packages ready"
"$root/scripts/build.sh"
stamp "built"
# MPI tests must run, not be skipped (lit fails without mpirun).
VMOE_REQUIRE_MPI=1 "$root/scripts/build.sh" "$suite"
stamp "$suite passed"
# Fuzz smoke: every fuzz target 30 s from its seeds (docs/Fuzzing.md).
"$root/scripts/fuzz.sh" smoke 30
stamp "fuzz smoke passed"
