"""Checks `ptxas -v` output against a register and spill budget.

    ptxas -v ... 2>&1 | python3 ptxas_budget.py --max-registers N
        [--max-spill-bytes S] [--name RE]

Prints one line per kernel ("<kernel>: R registers, S bytes spilled") and a
summary; exits 1 when a kernel whose name matches --name uses more than N
registers or spills more than S bytes (stores and loads; default 0).
"""

import argparse
import re
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-registers", type=int, required=True)
    parser.add_argument("--max-spill-bytes", type=int, default=0)
    parser.add_argument("--name", default=".")
    args = parser.parse_args()
    kernels = []
    current = None
    for line in sys.stdin:
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = {"name": m.group(1), "regs": 0, "spill": 0}
            kernels.append(current)
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                      line)
        if m:
            current["spill"] = int(m.group(1)) + int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["regs"] = int(m.group(1))
    checked = [k for k in kernels if re.search(args.name, k["name"])]
    bad = 0
    for k in checked:
        over = (k["regs"] > args.max_registers
                or k["spill"] > args.max_spill_bytes)
        bad += over
        print(f"{k['name']}: {k['regs']} registers, {k['spill']} bytes "
              f"spilled{'  OVER BUDGET' if over else ''}")
    top = max((k["regs"] for k in checked), default=0)
    spill = max((k["spill"] for k in checked), default=0)
    print(f"ptxas budget: {len(checked)} kernels, at most {top} registers "
          f"(budget {args.max_registers}) and {spill} spilled bytes (budget "
          f"{args.max_spill_bytes}), {bad} over budget")
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
