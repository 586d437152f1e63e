#!/usr/bin/env python3
"""Names and tabulates the parallel regions that bench/omp_regions.c timed.

    omp_regions.py r.txt [--top N] [--compare other.txt]

Per region (the outlined function, named with `nm`): calls, wall time,
busy thread time and idle thread time (threads x wall - busy: the waits at
the region's end), largest wall first. With --compare, the thread time of
each region in the other run over this run's (say two threads over one,
or a slow run over a fast one), largest change first.
"""

import argparse
import subprocess
import sys


def symbols(path, cache={}):
    """Offset -> name of the functions of a module (local ones included)."""
    if path not in cache:
        names = {}
        try:
            out = subprocess.run(["nm", path], capture_output=True, text=True,
                                 check=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            sys.exit(f"omp_regions.py: cannot read the symbols of {path}: {e}")
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "tTwW":
                names[int(parts[0], 16)] = parts[2]
        cache[path] = names
    return cache[path]


def load(path):
    """Region name -> (calls, wall, busy per thread)."""
    regions = {}
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        sys.exit(f"omp_regions.py: {e}")
    for number, line in enumerate(lines, 1):
        parts = line.split()
        try:
            module, offset, calls = parts[0], int(parts[1], 16), int(parts[2])
            wall = float(parts[3])
            busy = [float(b) for b in parts[4:]]
        except (IndexError, ValueError):
            sys.exit(f"omp_regions.py: {path}:{number}: not a region line")
        name = symbols(module).get(offset, f"{module}+{offset:#x}")
        regions[name] = (calls, wall, busy)
    return regions


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("regions")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--compare")
    args = parser.parse_args()
    regions = load(args.regions)
    threads = max((sum(1 for b in busy if b > 0)
                   for _, _, busy in regions.values()), default=1)
    wall = sum(r[1] for r in regions.values())
    busy = sum(sum(r[2]) for r in regions.values())
    print(f"{len(regions)} regions, {threads} thread(s): wall {wall * 1e3:.1f} ms, "
          f"busy {busy * 1e3:.1f} ms, idle {(threads * wall - busy) * 1e3:.1f} ms "
          f"({(threads * wall - busy) / max(threads * wall, 1e-12):.1%})")
    print(f"{'region':32} {'calls':>6} {'wall ms':>9} {'busy ms':>9} {'idle ms':>8}")
    for name, (calls, w, b) in sorted(regions.items(),
                                      key=lambda r: -r[1][1])[:args.top]:
        print(f"{name:32} {calls:6d} {w * 1e3:9.1f} {sum(b) * 1e3:9.1f} "
              f"{(threads * w - sum(b)) * 1e3:8.1f}")
    if args.compare:
        other = load(args.compare)
        print(f"\nthread time in {args.compare} / in {args.regions}:")
        rows = [(sum(other[n][2]) - sum(r[2]), n, sum(r[2]), sum(other[n][2]))
                for n, r in regions.items() if n in other and sum(r[2]) > 0]
        for diff, name, a, b in sorted(rows, reverse=True)[:args.top]:
            print(f"{name:32} {a * 1e3:9.1f} -> {b * 1e3:9.1f} ms  {b / a:.3f}")


if __name__ == "__main__":
    main()
