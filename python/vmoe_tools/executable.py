"""Runs a model executable from vmoe-compile and parses what it prints.

    logits, stats = run_executable(exe, weights, image_list,
                                   capacity_ratio=None, padding=None)

logits: float64 [N, classes] from --print-logits; stats: {MoE block:
statistics row} from --stats (parse_stats_line). Shared by the
checks that compare compiled models with the PyTorch reference
(check_digits, check_model).
"""

import argparse
import os
import re
import subprocess

import numpy as np

_LOGITS = re.compile(r"^(?P<path>.*): logits (?P<values>[-+0-9.eEinfa ]+)$")
_TOKEN_CHOICE = re.compile(r"^stats: MoE block (?P<block>\d+): kept per "
                           r"expert \[(?P<row>[0-9, ]*)\], dropped "
                           r"(?P<dropped>\d+)/")
_EXPERT_CHOICE = re.compile(r"^stats: MoE block (?P<block>\d+) \(expert "
                            r"choice\): experts per token \[(?P<row>[0-9, ]*)"
                            r"\]")
_LOSSES = re.compile(r"^losses: MoE block (?P<block>\d+): importance "
                     r"(?P<importance>\S+), load (?P<load>\S+), gshard "
                     r"(?P<gshard>\S+) ")
_SOFT = re.compile(r"^stats: MoE block (?P<block>\d+) \(soft\): slots per "
                   r"expert \[(?P<row>[0-9, ]*)\], nothing dropped")


def _ints(text):
    return [int(v) for v in text.split(",") if v.strip()]


def parse_stats_line(line):
    """(block, statistics row [E + 1]) of one `stats: MoE block` line of the
    executable (the layout of vmoe_ref.model.evaluate: kept per expert +
    [dropped]; experts per token for expert choice; slots per expert + [0]
    for Soft MoE), or None."""
    if match := _TOKEN_CHOICE.match(line):
        return int(match["block"]), _ints(match["row"]) + [
            int(match["dropped"])]
    if match := _EXPERT_CHOICE.match(line):
        return int(match["block"]), _ints(match["row"])
    if match := _SOFT.match(line):
        return int(match["block"]), _ints(match["row"]) + [0]
    return None


class RunError(Exception):
    """The executable failed or printed no logits (one-line message)."""


def run_executable(exe, weights, image_list, capacity_ratio=None,
                   padding=None, losses=False):
    """(logits [N, classes], {block: statistics row}) of one run; with
    `losses` (a training graph), also {block: [importance, load, gshard]}
    from --losses."""
    command = [exe, "--weights", weights, "--image-list", image_list,
               "--print-logits", "--stats", "--quiet"]
    if losses:
        command.append("--losses")
    if capacity_ratio is not None:
        command += ["--capacity-ratio", repr(capacity_ratio)]
    if padding is not None:
        command += ["--padding", padding]
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RunError(f"{os.path.basename(exe)} exited with "
                       f"{done.returncode}: {done.stderr.strip()}")
    logits, stats, layer_losses = [], {}, {}
    for line in done.stdout.splitlines():
        if match := _LOGITS.match(line):
            logits.append([float(v) for v in match["values"].split()])
        elif match := _LOSSES.match(line):
            layer_losses[int(match["block"])] = [
                float(match[key]) for key in ("importance", "load", "gshard")]
        elif parsed := parse_stats_line(line):
            stats[parsed[0]] = parsed[1]
    if not logits:
        raise RunError(f"{os.path.basename(exe)} printed no logits")
    if losses:
        return np.array(logits, dtype=np.float64), stats, layer_losses
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
