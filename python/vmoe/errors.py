"""Exceptions of the vmoe package: every failure of a public entry point
is one of these, with a one-line message naming the file or field."""

__all__ = ["CompileError", "FormatError", "ImporterError", "VMoEError"]


class VMoEError(Exception):
    """A vmoe failure; str() is the one-line message of the C API or tool."""


class CompileError(VMoEError):
    """vmoe-compile failed.

    Attributes:
        command: the vmoe-compile command line (list of strings).
        stderr: everything vmoe-compile printed on stderr.
    """

    def __init__(self, message, command, stderr):
        super().__init__(message)
        self.command = command
        self.stderr = stderr


class FormatError(VMoEError, ValueError):
    """A malformed file (safetensors, JSON): a ValueError too."""


class ImporterError(VMoEError, ValueError):
    """A checkpoint or option the importers cannot convert (one line); a
    ValueError too."""
