"""Runs a model executable from vmoe-compile and parses what it prints.

    logits, stats = run_executable(exe, weights, image_list,
                                   capacity_ratio=None, padding=None)

logits: float64 [N, classes] from --print-logits; stats: {MoE block:
kept choices per expert + [dropped choices]} from --stats. Shared by the
checks that compare compiled models with the PyTorch reference
(check_digits, check_model).
"""

import argparse
import os
import re
import subprocess

import numpy as np

_LOGITS = re.compile(r"^(?P<path>.*): logits (?P<values>[-+0-9.eEinfa ]+)$")
_STATS = re.compile(r"^stats: MoE block (?P<block>\d+): kept per expert "
                    r"\[(?P<kept>[0-9, ]*)\], dropped (?P<dropped>\d+)/")


class RunError(Exception):
    """The executable failed or printed no logits (one-line message)."""


def run_executable(exe, weights, image_list, capacity_ratio=None,
                   padding=None):
    """(logits [N, classes], {block: kept + [dropped]}) of one run."""
    command = [exe, "--weights", weights, "--image-list", image_list,
               "--print-logits", "--stats", "--quiet"]
    if capacity_ratio is not None:
        command += ["--capacity-ratio", repr(capacity_ratio)]
    if padding is not None:
        command += ["--padding", padding]
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RunError(f"{os.path.basename(exe)} exited with "
                       f"{done.returncode}: {done.stderr.strip()}")
    logits, stats = [], {}
    for line in done.stdout.splitlines():
        if match := _LOGITS.match(line):
            logits.append([float(v) for v in match["values"].split()])
        elif match := _STATS.match(line):
            kept = [int(v) for v in match["kept"].split(",") if v.strip()]
            stats[int(match["block"])] = kept + [int(match["dropped"])]
    if not logits:
        raise RunError(f"{os.path.basename(exe)} printed no logits")
    return np.array(logits, dtype=np.float64), stats


def capacity_list(text):
    """argparse type: a comma-separated list of positive capacity ratios."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}")
    if not values or any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError("capacity ratios must be positive")
    return values
