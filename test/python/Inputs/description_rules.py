"""vmoe.importers.checks against vmoe-compile's own expectations.

    description_rules.py SRC_ROOT

Every bad description of test/Frontend/*.test that vmoe-compile refuses at
its default options (a `not vmoe-compile %t/NAME.json --emit=mlir` RUN line
and its `PREFIX: error: {{.*}}NAME.json: MESSAGE` check) must be refused by
check_description with the same MESSAGE (the descriptions are split-file
sections, or lines of a cases file for Inputs/write_cases.py: the
`preprocess` strings of preprocess.test), and every one it compiles
(`vmoe-compile %t/NAME.json --emit=mlir`) must pass; the limits of
limits.test, applied to tiny-model.json with Inputs/set_fields.py's edits,
likewise. Every valid
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
sys.path.insert(0, os.path.join(root, "test/Frontend/Inputs"))
from set_fields import set_fields  # pylint: disable=wrong-import-position
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


def case_descriptions(test, text, sections):
    """{NAME.json: description} of a test: its split-file JSON sections,
    and the descriptions Inputs/write_cases.py writes from a cases file
    (preprocess.test)."""
    descs = {}
    for name, content in sections.items():
        try:
            descs[name] = json.loads(content)
        except ValueError:
            pass  # malformed JSON: the parser's, not a rule
    for base, cases in re.findall(r"write_cases\.py (\S+)\s+%t/(\S+) %t",
                                  text):
        with open(base.replace("%S", os.path.dirname(test)),
                  encoding="utf-8") as f:
            base_desc = f.read()
        for line in sections[cases].splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            name, *assignments = shlex.split(line)
            descs[name + ".json"] = set_fields(json.loads(base_desc),
                                               assignments)
    return descs


def frontend_cases():
    """(refusals compared, valid descriptions accepted)."""
    count = accepted = 0
    for test in sorted(glob.glob(os.path.join(root, "test/Frontend/*.test"))):
        with open(test, encoding="utf-8") as f:
            text = f.read().replace("\\\nRUN:", "")
        descs = case_descriptions(test, text, split_file(text))
        runs = re.findall(r"^RUN: not vmoe-compile %t/(\S+\.json) "
                          r"--emit=mlir 2>&1 \| FileCheck %s "
                          r"--check-prefix=([\w-]+)$", text, re.M)
        for name, prefix in runs:
            check = re.search(rf"^{prefix}: error: \{{\{{\.\*\}}\}}"
                              rf"(?:{re.escape(name)})?: (.*)$", text, re.M)
            if name not in descs or check is None:
                continue
            compare(f"{os.path.basename(test)}:{name}", descs[name],
                    pattern(check.group(1)))
            count += 1
        for name in re.findall(r"^RUN: vmoe-compile %t/(\S+\.json) "
                               r"--emit=mlir(?: -o /dev/null| \||$)", text,
                               re.M):
            if name in descs:
                got = refusal(descs[name])
                if got is not None:
                    failures.append(f"{os.path.basename(test)}:{name}")
                    print(f"FAIL {os.path.basename(test)}:{name}: refused: "
                          f"{got}")
                accepted += 1
    return count, accepted


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


refused, accepted = frontend_cases()
print(f"description_rules: {refused} refusals of test/Frontend compared")
print(f"description_rules: {accepted} valid descriptions of test/Frontend "
      "accepted")
print(f"description_rules: {limit_cases()} limits of limits.test compared")
print(f"description_rules: {valid_cases()} valid descriptions accepted")
print(f"description_rules: {len(failures)} failures")
sys.exit(1 if failures else 0)
