"""The runner of the self-test modules (test_*.py): every function named
test_* runs; each failure prints `FAIL name` and its traceback, then one
summary line; the exit status is 1 if any test failed."""

import sys
import traceback


def run(module_name, namespace):
    """Runs the test_* functions of `namespace` (a module's globals()) in
    name order; returns the exit status."""
    tests = [value for name, value in sorted(namespace.items())
             if name.startswith("test_") and callable(value)]
    failed = []
    for test in tests:
        try:
            test()
        except Exception:  # report every failure, then exit non-zero
            failed.append(test.__name__)
            print(f"FAIL {test.__name__}", file=sys.stderr)
            traceback.print_exc()
    print(f"{module_name}: {len(tests) - len(failed)} passed, "
          f"{len(failed)} failed")
    return 1 if failed else 0
