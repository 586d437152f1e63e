"""The `preprocess` string of a model description (docs/ModelFormat.md §4),
read with exactly the rules and one-line messages of the compiler's
include/vmoe/Support/PreprocessSpec.h, and the image ops of a big_vision or
V-MoE `process` string.

    spec = parse("decode|resize_small(256)|central_crop(224)|"
                 "value_range(-1, 1)")
    check(spec, channels=3, height=224, width=224)
    evaluation_ops('decode|resize(384)|value_range(-1,1)|onehot(1000)|'
                   'keep("image", "labels")', "config: dataset.test.process")
    # -> 'decode|resize(384)|value_range(-1,1)'

`parse` mirrors parsePreprocess (the grammar, `decode` first, `value_range`
last, each op's arguments), `check` mirrors checkPreprocess (decode's
channels; the pipeline ends on the model's height x width; a crop fits the
image the op before it makes). Both raise ImporterError("WHAT: problem"),
WHAT naming the field or option; the problem is the compiler's text.
"""

import math
import re
from dataclasses import dataclass, field

from ..errors import ImporterError
from .limits import MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE

__all__ = ["LABEL_OPS", "TRAINING_OPS", "Spec", "check", "evaluation_ops",
           "parse", "without_value_range"]

# Ops of a `process` string that act on the labels or the example's keys,
# not on the image: left out of the model's preprocessing.
LABEL_OPS = frozenset(("onehot", "keep", "drop", "copy", "rename", "flatten",
                       "ignore_no_labels"))
# Random augmentations of training pipelines: never part of evaluation.
TRAINING_OPS = frozenset(("flip_lr", "flip_ud", "randaug", "autoaugment",
                          "inception_crop", "decode_jpeg_and_inception_crop",
                          "random_crop", "mixup"))

_SPACES = " \t\n\v\f\r"  # llvm::isSpace, StringRef::trim
_ALPHA = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGITS = frozenset("0123456789")
_NUMBER_CHARS = _DIGITS | frozenset(".eE")
_KNOWN = "decode, resize, resize_small, central_crop, value_range"


# What StringRef::getAsDouble (APFloat) accepts of the characters above:
# a mantissa with a digit, an exponent whose digits may be missing ("1e",
# "2e-": no exponent).
_DOUBLE = re.compile(r"([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))"
                     r"(?:[eE]([+-]?[0-9]*))?")


def _as_double(text):
    match = _DOUBLE.fullmatch(text)
    if match is None:
        return None
    mantissa, exponent = match.groups()
    has_digits = exponent is not None and exponent.lstrip("+-")
    return float(mantissa + ("e" + exponent if has_digits else ""))


class _Problem(Exception):
    """One op's problem, the compiler's text without the op suffix."""


@dataclass
class Value:
    """One argument value (ArgValue): kind "number", "bool", "string" or
    "pair"; `text` as written, for messages."""
    kind: str = "number"
    number: float = 0.0
    boolean: bool = False
    string: str = ""
    pair: tuple = (0.0, 0.0)
    text: str = ""

    def same(self, other):
        return (self.kind, self.number, self.boolean, self.string) == \
            (other.kind, other.number, other.boolean, other.string)


@dataclass
class Geometry:
    """A resize, resize_small (height = width = S) or central_crop."""
    kind: str
    height: int
    width: int
    text: str


@dataclass
class Spec:
    """A parsed `preprocess` string (PreprocessSpec)."""
    precise: bool = False
    channels: int = 0
    geometry: list = field(default_factory=list)
    value_range: tuple = None


class _OpParser:
    """OpParser: "name", "name()" or "name(args)", args Python-style."""

    def __init__(self, text):
        self.text, self.position = text, 0

    def at_end(self):
        return self.position >= len(self.text)

    def rest(self):
        return self.text[self.position:]

    def skip_spaces(self):
        while not self.at_end() and self.text[self.position] in _SPACES:
            self.position += 1

    def consume(self, char):
        if self.at_end() or self.text[self.position] != char:
            return False
        self.position += 1
        return True

    def identifier(self):
        start = self.position
        if self.at_end() or not (self.text[start] in _ALPHA or
                                 self.text[start] == "_"):
            return ""
        while not self.at_end() and (self.text[self.position] in _ALPHA or
                                     self.text[self.position] in _DIGITS or
                                     self.text[self.position] == "_"):
            self.position += 1
        return self.text[start:self.position]

    def parse(self):
        """(name, [(key or "", Value)])."""
        self.skip_spaces()
        name = self.identifier()
        if not name:
            raise _Problem("expected an op name")
        self.skip_spaces()
        args = []
        if self.at_end():
            return name, args
        if not self.consume("("):
            raise _Problem(f"unexpected '{self.rest()}' after '{name}'")
        self.skip_spaces()
        if self.consume(")"):
            return self.finish(name, args)
        while True:
            start = self.position
            key = self.identifier()
            self.skip_spaces()
            if not (key and self.consume("=")):
                key, self.position = "", start
            args.append((key, self.value()))
            self.skip_spaces()
            if self.consume(")"):
                return self.finish(name, args)
            if self.at_end():
                raise _Problem("missing ')'")
            if not self.consume(","):
                raise _Problem(f"expected ',' or ')' at '{self.rest()}'")
            self.skip_spaces()

    def finish(self, name, args):
        self.skip_spaces()
        if not self.at_end():
            raise _Problem(f"unexpected '{self.rest()}' after ')'")
        return name, args

    def number(self):
        """[+-] then digits, '.', e/E and a sign after e/E; what
        StringRef::getAsDouble accepts of that, finite."""
        text, start = self.text, self.position
        if not self.at_end() and text[self.position] in "+-":
            self.position += 1
        while not self.at_end() and (
                text[self.position] in _NUMBER_CHARS or
                (text[self.position] in "+-" and
                 text[self.position - 1] in "eE")):
            self.position += 1
        value = _as_double(text[start:self.position])
        if value is None or not math.isfinite(value):
            raise _Problem(f"expected a number at '{text[start:]}'")
        return value

    def value(self):
        text, start = self.text, self.position
        char = text[start] if not self.at_end() else "\0"
        out = Value()
        if char in "'\"":
            end = text.find(char, start + 1)
            if end < 0:
                raise _Problem("unterminated string")
            out.kind, out.string = "string", text[start + 1:end]
            self.position = end + 1
        elif char in "([":
            close = ")" if char == "(" else "]"
            self.position += 1
            pair = []
            for i in range(2):
                self.skip_spaces()
                pair.append(self.number())
                self.skip_spaces()
                if not self.consume("," if i == 0 else close):
                    raise _Problem(f"expected a pair (a, b) at "
                                   f"'{text[start:]}'")
            out.kind, out.pair = "pair", tuple(pair)
        elif char in _ALPHA:
            word = self.identifier()
            if word not in ("True", "False"):
                raise _Problem(f"expected a value, got '{word}'")
            out.kind, out.boolean = "bool", word == "True"
        else:
            out.number = self.number()
        out.text = text[start:self.position].strip(_SPACES)
        return out


def _bind(op, names, required, args):
    """bindArgs: each parameter's Value or None (Python's rules)."""
    bound = [None] * len(names)
    positional = 0
    for key, value in args:
        if not key:
            # The compiler looks at the argument at the positional index.
            if positional > 0 and args[positional - 1][0]:
                raise _Problem(f"{op}: positional argument after a keyword "
                               "argument")
            index = positional
            positional += 1
            if index >= len(names):
                raise _Problem(f"{op}: takes at most {len(names)} "
                               "argument(s)")
        else:
            if key not in names:
                raise _Problem(f"{op}: unknown argument '{key}'")
            index = names.index(key)
        if bound[index] is not None:
            raise _Problem(f"{op}: argument '{names[index]}' given twice")
        bound[index] = value
    for i in range(required):
        if bound[i] is None:
            raise _Problem(f"{op}: missing argument '{names[i]}'")
    return bound


def _require_default(op, name, value, expected):
    """An optional argument, when given, has the only value implemented."""
    if value is not None and not value.same(expected):
        raise _Problem(f"{op}: {name}={value.text} is not supported (only "
                       f"{expected.text})")


def _is_image_side(x):
    return 1 <= x <= MAX_IMAGE_SIDE and x == int(x)


def _size(op, value, pair_allowed):
    """readSize: (height, width) of S, (H, W) or [H, W]."""
    h = w = value.number
    if value.kind == "pair" and pair_allowed:
        h, w = value.pair
    elif value.kind != "number":
        what = "an integer or a pair (H, W)" if pair_allowed else \
            "an integer"
        raise _Problem(f"{op}: the size must be {what}, got {value.text}")
    if not _is_image_side(h) or not _is_image_side(w):
        raise _Problem(f"{op}: sizes must be integers in [1, "
                       f"{MAX_IMAGE_SIDE}], got {value.text}")
    return int(h), int(w)


_FALSE = Value(kind="bool", text="False")


def _string(text):
    return Value(kind="string", string=text, text=f"'{text}'")


def _decode(args, spec):
    channels, precise = _bind("decode", ["channels", "precise"], 0, args)
    if channels is not None:
        if channels.kind != "number" or channels.number not in (1, 3):
            raise _Problem(f"decode: channels must be 1 or 3, got "
                           f"{channels.text}")
        spec.channels = int(channels.number)
    if precise is not None:
        if precise.kind != "bool":
            raise _Problem(f"decode: precise must be True or False, got "
                           f"{precise.text}")
        spec.precise = precise.boolean


def _value_range(args, spec):
    bound = _bind("value_range",
                  ["vmin", "vmax", "in_min", "in_max", "clip_values"], 2,
                  args)
    for value in bound[:2]:
        if value.kind != "number":
            raise _Problem(f"value_range: vmin and vmax must be numbers, got "
                           f"{value.text}")
    if bound[0].number == bound[1].number:
        raise _Problem("value_range: vmin and vmax must differ")
    for name, value, expected in (
            ("in_min", bound[2], Value(number=0.0, text="0")),
            ("in_max", bound[3], Value(number=255.0, text="255")),
            ("clip_values", bound[4], _FALSE)):
        _require_default("value_range", name, value, expected)
    spec.value_range = (bound[0].number, bound[1].number)


def _geometry(name, text, args):
    """readOp's resizes and crops."""
    two_sizes = name in ("resize", "central_crop") and len(args) == 2 and \
        not args[0][0] and not args[1][0] and \
        args[0][1].kind == "number" and args[1][1].kind == "number"
    if two_sizes:
        height = _size(name, args[0][1], False)[0]
        width = _size(name, args[1][1], False)[1]
    elif name in ("resize", "resize_small"):
        small = name == "resize_small"
        size, method, antialias = _bind(
            name, ["smaller_size" if small else "size", "method",
                   "antialias"], 1, args)
        height, width = _size(name, size, not small)
        _require_default(name, "method", method,
                         _string("area" if small else "bilinear"))
        _require_default(name, "antialias", antialias, _FALSE)
    elif name == "central_crop":
        height, width = _size(name, _bind(name, ["crop_size"], 1, args)[0],
                              True)
    else:
        raise _Problem(f"unknown op '{name}' (known: {_KNOWN})")
    if name == "resize_small":
        width = height
    elif height * width > MAX_IMAGE_PIXELS:
        raise _Problem(f"{text}: {height * width} pixels, above the limit "
                       f"{MAX_IMAGE_PIXELS}")
    return Geometry(name, height, width, text)


def parse(text, what="preprocess"):
    """The Spec of a `preprocess` string: `decode` first, any resizes and
    crops, optionally `value_range` last. ImporterError("WHAT: problem (op
    N: 'text')") otherwise."""
    if not isinstance(text, str):
        raise ImporterError(f"{what}: must be a string")
    ops = text.split("|")
    return _parse_ops(ops, range(1, len(ops) + 1), what)


def _parse_ops(ops, numbers, what):
    """parsePreprocess over the ops; `numbers`: each op's number in
    messages."""
    spec = Spec()
    for index, (raw, number) in enumerate(zip(ops, numbers)):
        op = raw.strip(_SPACES)
        try:
            name, args = _OpParser(op).parse()
            if name == "decode" and index != 0:
                raise _Problem("decode must be the first op")
            if index == 0 and name != "decode":
                raise _Problem(f"the first op must be decode, got '{name}'")
            if spec.value_range is not None:
                raise _Problem("value_range must be the last op")
            if name == "decode":
                _decode(args, spec)
            elif name == "value_range":
                _value_range(args, spec)
            else:
                spec.geometry.append(_geometry(name, op, args))
        except _Problem as problem:
            raise ImporterError(f"{what}: {problem} (op {number}: "
                                f"'{op}')") from None
    return spec


def check(spec, channels, height, width, what="preprocess"):
    """checkPreprocess: `spec` against a model's image; ImporterError
    ("WHAT: problem") unless it makes channels x height x width inputs."""
    def fail(problem):
        raise ImporterError(f"{what}: {problem}")

    if spec.channels and spec.channels != channels:
        fail(f"decode(channels={spec.channels}): the model takes {channels}"
             "-channel images")
    if not spec.geometry:
        return
    h = w = shorter = 0
    for op in spec.geometry:
        if op.kind == "central_crop" and (
                (h and (op.height > h or op.width > w)) or
                (shorter and max(op.height, op.width) > shorter)):
            made = f"{h}x{w}" if h else f"shorter side {shorter}"
            fail(f"{op.text} does not fit the images the op before it makes "
                 f"({made})")
        small = op.kind == "resize_small"
        h, w = (0, 0) if small else (op.height, op.width)
        shorter = op.height if small else 0
    if (h, w) != (height, width):
        got = f"got {h}x{w}" if h else \
            f"its last op is {spec.geometry[-1].text}"
        fail(f"the pipeline must end with a resize or central_crop to the "
             f"model's {height}x{width} (height x width), {got}")


def without_value_range(text):
    """A parsed pipeline without its last op, `value_range` (the ops are
    split at '|' as `parse` splits them)."""
    return "|".join(text.split("|")[:-1])


def _op_name(op):
    parser = _OpParser(op)
    parser.skip_spaces()
    return parser.identifier()


def evaluation_ops(process, what):
    """The image ops of a big_vision / V-MoE `process` string (the ops
    joined by '|', as written), its label ops (LABEL_OPS) left out, checked
    as `parse` checks them. A random training augmentation (TRAINING_OPS),
    an op the compiler does not know or a bad argument is an
    ImporterError("WHAT: problem (op N: 'text')"), N counting the ops of
    `process`."""
    if not isinstance(process, str):
        raise ImporterError(f"{what}: must be a string")
    kept, numbers = [], []
    for number, raw in enumerate(process.split("|"), 1):
        op = raw.strip(_SPACES)
        name = _op_name(op)
        if name in TRAINING_OPS:
            raise ImporterError(
                f"{what}: {name} is a random training augmentation, not an "
                f"evaluation op (op {number}: '{op}')")
        if name not in LABEL_OPS:
            kept.append(op)
            numbers.append(number)
    if not kept:
        raise ImporterError(f"{what}: no image ops (decode, resize, ...)")
    _parse_ops(kept, numbers, what)
    return "|".join(kept)
