"""JSON as vmoe-compile reads it: UTF-8, at most 64 levels of nesting
(docs/Limits.md), finite numbers only (no NaN, Infinity or 1e400), every
failure one line (FormatError)."""

import json
import math

from ._files import open_regular
from .errors import FormatError

__all__ = ["MAX_NESTING", "parse", "read"]

# docs/Limits.md: the nesting limit of every JSON file vmoe reads.
MAX_NESTING = 64


def _finite(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is not finite")
    return value


def _constant(name):
    raise ValueError(f"{name} is not JSON (numbers must be finite)")


def _depth(value):
    """Nesting levels of arrays and objects in a parsed value."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        children = node.values() if isinstance(node, dict) else \
            node if isinstance(node, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_NESTING:
            break
        stack.extend((child, level + 1) for child in children)
    return deepest


def _nesting(what):
    return (f"{what}: malformed JSON: nesting exceeds the limit of "
            f"{MAX_NESTING} levels")


def parse(data, what, error=FormatError):
    """The value of JSON `data` (bytes or str); `what` names it in errors,
    which are `error` (a FormatError by default)."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        value = json.loads(text, parse_float=_finite,
                           parse_constant=_constant)
    except UnicodeDecodeError as err:
        raise error(f"{what}: not UTF-8 (byte {err.start})") from None
    except RecursionError:  # deeper than Python's parser goes
        raise error(_nesting(what)) from None
    except ValueError as err:  # JSONDecodeError, huge ints, non-finite
        message = str(err).splitlines()[0] if str(err) else "invalid"
        raise error(f"{what}: malformed JSON: {message}") from None
    if _depth(value) > MAX_NESTING:
        raise error(_nesting(what))
    return value


def read(path, what=None, error=FormatError):
    """The value of the JSON file `path` (errors name `what` or path)."""
    with open_regular(path, error) as f:
        try:
            data = f.read()
        except OSError as err:
            raise error(f"{path}: {err.strerror or err}") from None
    return parse(data, what or path, error)
