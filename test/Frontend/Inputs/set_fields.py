"""Prints a model description with fields replaced: the limits tests.

usage: set_fields.py BASE.json KEY=JSON [KEY=JSON ...]
KEY is a dotted path ("moe.group_size"); JSON is the new value, parsed as
JSON ("1e300", "[1, 2]"); the value "DELETE" removes the field.
"""

import json
import sys


def set_fields(model, assignments):
    """`model` with each KEY=JSON of `assignments` applied."""
    for assignment in assignments:
        key, value = assignment.split("=", 1)
        *parents, last = key.split(".")
        target = model
        for parent in parents:
            target = target[parent]
        if value == "DELETE":
            del target[last]
        else:
            target[last] = json.loads(value)
    return model


if __name__ == "__main__":
    json.dump(set_fields(json.load(open(sys.argv[1])), sys.argv[2:]),
              sys.stdout)
