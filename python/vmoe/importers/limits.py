"""docs/Limits.md in Python: the limits vmoe-compile and the runtime apply
(include/vmoe/Support/Limits.h), numbers formatted as the compiler prints
them, and the checks of option values (`number`, `integer`: finite, in
range, one-line ImporterError naming the option)."""

import math

from ..errors import ImporterError

__all__ = ["MAX_CAPACITY_RATIO", "MAX_DEPTH", "MAX_DIMENSION",
           "MAX_IMAGE_PIXELS", "MAX_IMAGE_SIDE", "MAX_TENSOR_ELEMENTS",
           "MAX_TOTAL_WEIGHTS", "integer", "number", "shortest"]

# include/vmoe/Support/Limits.h.
MAX_DIMENSION = 1 << 24
MAX_TENSOR_ELEMENTS = 1 << 40
MAX_TOTAL_WEIGHTS = 1 << 40
MAX_DEPTH = 1024
MAX_CAPACITY_RATIO = 4096.0
MAX_IMAGE_SIDE = 65535
MAX_IMAGE_PIXELS = 1 << 27


def shortest(value):
    """`value` as the compiler prints a double (%g, shortest round trip)."""
    value = float(value)
    for precision in range(1, 18):
        text = f"{value:.{precision}g}"
        if float(text) == value or math.isnan(value):
            return text
    return text


def number(value, what, minimum=None, maximum=None, above=None):
    """`value` as a finite float in range, else ImporterError naming
    `what` (`above`: an exclusive lower bound)."""
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ImporterError(f"{what}: expected a number, got "
                               f"{value!r}") from None
    if not math.isfinite(x):
        raise ImporterError(f"{what}: must be a finite number, got "
                               f"{shortest(x)}")
    if above is not None and not x > above:
        raise ImporterError(f"{what}: must be > {shortest(above)}, got "
                               f"{shortest(x)}")
    if minimum is not None and x < minimum:
        raise ImporterError(f"{what}: must be >= {shortest(minimum)}, got "
                               f"{shortest(x)}")
    if maximum is not None and x > maximum:
        raise ImporterError(f"{what}: must be <= {shortest(maximum)} (the "
                               f"limit), got {shortest(x)}")
    return x


def integer(value, what, minimum=1, maximum=MAX_DIMENSION):
    """`value` as an int in [minimum, maximum], else ImporterError."""
    if isinstance(value, bool):
        value = None
    try:
        n = int(value) if isinstance(value, str) else \
            value.__index__()
    except (AttributeError, TypeError, ValueError):
        raise ImporterError(f"{what}: expected an integer, got "
                               f"{value!r}") from None
    if n < minimum:
        raise ImporterError(f"{what}: must be >= {minimum}, got {n}")
    if n > maximum:
        raise ImporterError(f"{what}: must be <= {maximum} (the limit), "
                               f"got {n}")
    return n
