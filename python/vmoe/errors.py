"""Exceptions of the vmoe package."""

__all__ = ["CompileError", "VMoEError"]


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
