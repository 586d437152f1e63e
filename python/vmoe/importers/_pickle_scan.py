"""A pickle's opcodes walked before it is unpickled (pickletools builds
nothing): `scan` refuses opcodes torch.save never writes, memo indices out
of sequence (the C unpickler would allocate a memo that large) and
hashable objects that expand to more than 10^6 nodes through shared
references (hashing one, as a dict key, walks every node). `Malformed` is
the error of the torch reader (one line)."""

import pickletools

__all__ = ["Malformed", "scan"]


class Malformed(ValueError):
    """The checkpoint breaks a rule of its format (one line)."""


# Pickle opcodes torch.save never writes: protocol 5's out-of-band buffers
# (a damaged stream of them made CPython report a SystemError at exit).
_DENIED_OPCODES = {"BYTEARRAY8", "NEXT_BUFFER", "READONLY_BUFFER"}

# The most nodes a tuple or frozenset may expand to through shared (memo)
# references: hashing one (a dict key) walks every node, so 60 levels of
# (t, t) would take 2^60 steps.
_MAX_EXPANDED = 1_000_000
_TUPLES = {"TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "FROZENSET"}


def _popped(opcode, stack, marks):
    """The stack entries `opcode` consumes (removed from `stack`)."""
    before = opcode.stack_before
    count = len(before)
    if pickletools.markobject in before:
        if not marks:
            raise Malformed(f"pickle opcode {opcode.name} without a mark")
        start = marks.pop()
        count = before.index(pickletools.markobject)
        popped = stack[start:]
        del stack[start:]
    else:
        popped = []
    if count > len(stack):
        raise Malformed("pickle stack underflow")
    below = stack[len(stack) - count:] if count else []
    del stack[len(stack) - len(below):]
    return below + popped


def scan(stream):
    """Walks the pickle's opcodes (pickletools, which builds nothing) as
    the unpickler will run them, tracking how many nodes each tuple
    expands to. Refuses: opcodes torch.save never writes, memo indices
    out of sequence (the C unpickler would allocate a memo that large),
    hashable objects expanding beyond _MAX_EXPANDED nodes."""
    stack, marks, memo = [], [], {}
    for opcode, arg, pos in pickletools.genops(stream):
        name = opcode.name
        if name in _DENIED_OPCODES:
            raise Malformed(f"pickle opcode {name}")
        if name == "MARK":
            marks.append(len(stack))
            continue
        if name in ("PUT", "BINPUT", "LONG_BINPUT"):
            if not stack or not 0 <= arg <= pos:
                raise Malformed(f"pickle memo index {arg} at byte {pos}")
            memo[arg] = stack[-1]
            continue
        popped = _popped(opcode, stack, marks)
        if name in _TUPLES:
            size = 1 + sum(popped)
            if size > _MAX_EXPANDED:
                raise Malformed(f"a tuple of more than {_MAX_EXPANDED} "
                                "nodes (shared references)")
            stack.append(size)
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            if arg not in memo:
                raise Malformed(f"pickle memo index {arg} not set")
            stack.append(memo[arg])
        elif name == "MEMOIZE":
            memo[len(memo)] = popped[0]
            stack.append(popped[0])
        elif name == "DUP":
            stack.extend(popped * 2)
        else:  # what else is built hashes in O(1) or is unhashable
            stack.extend([1] * len(opcode.stack_after))
