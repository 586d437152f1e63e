"""Writes one model description per line of a cases file: the limits and
preprocess tests' inputs in one process.

usage: write_cases.py BASE.json CASES OUTDIR
Each line of CASES is `NAME KEY=JSON ...` (shell quoting): OUTDIR/NAME.json
is BASE with the fields replaced as set_fields.py replaces them. Blank
lines and lines starting with '#' are skipped.
"""

import json
import os
import shlex
import sys

from set_fields import set_fields

base, cases, outdir = sys.argv[1:4]
for line in open(cases):
    if not line.strip() or line.startswith("#"):
        continue
    name, *assignments = shlex.split(line)
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(set_fields(json.load(open(base)), assignments), f)
