"""vmoe.importers.checks against vmoe-compile's own expectations.

    description_rules.py SRC_ROOT

Every bad description of test/Frontend/*.test that vmoe-compile refuses at
its default options (a `not vmoe-compile %t/NAME.json --emit=mlir` RUN line
and its `PREFIX: error: {{.*}}NAME.json: MESSAGE` check) must be refused by
check_description with the same MESSAGE; the limits of limits.test, applied
to tiny-model.json with Inputs/set_fields.py's edits, likewise. Every valid
description of the repository (examples/, test/Tools/Inputs/) must pass,
and the example weights must match the layout check_weights expects. Prints
one line per group and FAIL lines; exits 1 on any failure.
"""

import glob
import json
import os
import re
import shlex
import sys

from vmoe import safetensors
from vmoe.importers import ImporterError, checks, common

root = sys.argv[1]
failures = []


def split_file(text):
    """{name: content} of split-file's `//--- NAME` sections."""
    sections, name = {}, None
    for line in text.splitlines(keepends=True):
        if line.startswith("//--- "):
            name = line[len("//--- "):].strip()
            sections[name] = ""
        elif name is not None:
            sections[name] += line
    return sections


def pattern(check):
    """A FileCheck pattern as a regex ({{...}} is a regex already)."""
    parts = re.split(r"(\{\{.*?\}\})", check)
    return "".join(p[2:-2] if p.startswith("{{") else re.escape(p)
                   for p in parts)


def refusal(desc):
    try:
        checks.check_description(desc)
    except ImporterError as err:
        return str(err)
    return None


def compare(label, desc, want):
    got = refusal(desc)
    if got is None or not re.fullmatch(want, got):
        failures.append(label)
        print(f"FAIL {label}: want /{want}/, got {got!r}")


def frontend_cases():
    count = 0
    for test in sorted(glob.glob(os.path.join(root, "test/Frontend/*.test"))):
        with open(test, encoding="utf-8") as f:
            text = f.read()
        sections = split_file(text)
        runs = re.findall(r"^RUN: not vmoe-compile %t/(\S+\.json) "
                          r"--emit=mlir 2>&1 \| FileCheck %s "
                          r"--check-prefix=(\w+)$", text, re.M)
        for name, prefix in runs:
            check = re.search(rf"^{prefix}: error: \{{\{{\.\*\}}\}}"
                              rf"{re.escape(name)}: (.*)$", text, re.M)
            if name not in sections or check is None:
                continue
            try:
                desc = json.loads(sections[name])
            except ValueError:
                continue  # malformed JSON: the parser's, not a rule
            compare(f"{os.path.basename(test)}:{name}", desc,
                    pattern(check.group(1)))
            count += 1
    return count


def limit_cases():
    """limits.test's `%{set} FIELD=VALUE ... > %t/NAME.json` edits."""
    with open(os.path.join(root, "test/Frontend/limits.test"),
              encoding="utf-8") as f:
        text = f.read()
    with open(os.path.join(root, "test/Tools/Inputs/tiny-model.json"),
              encoding="utf-8") as f:
        base = f.read()
    count = 0
    for edits, name in re.findall(r"^RUN: %\{set\} (.*) > %t/(\S+\.json)$",
                                  text, re.M):
        run = re.search(rf"^RUN: not vmoe-compile %t/{re.escape(name)} -o "
                        rf"%t/\S+ 2>&1 \| FileCheck %s "
                        rf"--check-prefix=([\w-]+)$", text, re.M)
        if run is None:
            continue
        check = re.search(rf"^{run.group(1)}: error: \{{\{{\.\*\}}\}}"
                          rf"{re.escape(name)}: (.*)$", text, re.M)
        desc = json.loads(base)
        for edit in shlex.split(edits):
            field, value = edit.split("=", 1)
            *parents, key = field.split(".")
            target = desc
            for part in parents:
                target = target[part]
            target[key] = json.loads(value)
        compare(f"limits.test:{name}", desc, pattern(check.group(1)))
        count += 1
    return count


def valid_cases():
    count = 0
    for path in sorted(glob.glob(os.path.join(root, "examples/*/*.json")) +
                       glob.glob(os.path.join(root,
                                              "test/Tools/Inputs/*.json"))):
        with open(path, encoding="utf-8") as f:
            desc = json.load(f)
        got = refusal(desc)
        if got is not None:
            failures.append(path)
            print(f"FAIL {path}: refused: {got}")
        weights = path[:-len(".json")] + ".safetensors"
        if os.path.exists(weights):
            try:
                common.check_weights(desc, safetensors.load(weights))
            except ImporterError as err:
                failures.append(weights)
                print(f"FAIL {weights}: {err}")
        count += 1
    return count


print(f"description_rules: {frontend_cases()} refusals of test/Frontend "
      "compared")
print(f"description_rules: {limit_cases()} limits of limits.test compared")
print(f"description_rules: {valid_cases()} valid descriptions accepted")
print(f"description_rules: {len(failures)} failures")
sys.exit(1 if failures else 0)
