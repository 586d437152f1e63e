"""Prints a model description with fields replaced: the limits tests.

usage: set_fields.py BASE.json KEY=JSON [KEY=JSON ...]
KEY is a dotted path ("moe.group_size"); JSON is the new value, parsed as
JSON ("1e300", "[1, 2]"); the value "DELETE" removes the field.
"""

import json
import sys

model = json.load(open(sys.argv[1]))
for assignment in sys.argv[2:]:
    key, value = assignment.split("=", 1)
    *parents, last = key.split(".")
    target = model
    for parent in parents:
        target = target[parent]
    if value == "DELETE":
        del target[last]
    else:
        target[last] = json.loads(value)
json.dump(model, sys.stdout)
