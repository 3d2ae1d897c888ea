"""Errors a user can act on, and the exit codes the CLI gives them.

Every error carries the fix: `StackError(what_went_wrong, hint=what_to_do)`.
The CLI prints both and exits with the error's code; it never prints a
traceback for a StackError.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    # A check ran and found a problem (doctor fail, smoke verdict, diff found).
    CHECK_FAILED = 1
    # The command line or an input file is wrong.
    USAGE = 2
    # A pins/profile/recipe data file is malformed.
    BAD_DATA = 3
    # Network or registry trouble (index unreachable, download failed).
    NETWORK = 4
    # A downloaded or vendored file does not match its pinned hash.
    HASH_MISMATCH = 5
    # The toolchain is wrong for the job (old cmake, CUDA 12 nvcc, wrong torch).
    TOOLCHAIN = 6
    # An external build or process failed.
    BUILD_FAILED = 7


class StackError(Exception):
    """An error with a message for a person and a hint that says what to do."""

    code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, hint: str | None = None, *, code: ExitCode | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class DataError(StackError):
    """A data file (pins, profile, recipe, rules) is malformed.

    The message names the file, the entry and the field.
    """

    code = ExitCode.BAD_DATA

    def __init__(self, path, entry: str | None, field: str | None, problem: str, hint: str | None = None):
        where = str(path)
        if entry:
            where += f": entry {entry!r}"
        if field:
            where += f", field {field!r}"
        super().__init__(f"{where}: {problem}", hint)
        self.path = path
        self.entry = entry
        self.field = field


class NetworkError(StackError):
    code = ExitCode.NETWORK


class HashMismatch(StackError):
    code = ExitCode.HASH_MISMATCH


class ToolchainError(StackError):
    code = ExitCode.TOOLCHAIN


class BuildError(StackError):
    code = ExitCode.BUILD_FAILED
