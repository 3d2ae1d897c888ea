"""Errors a user can act on, and the exit codes the CLI gives them.

Every error carries the fix: `StackError(what_went_wrong, hint=what_to_do)`. The CLI prints both and exits with the
error's code; it never prints a traceback for a StackError.
"""

from __future__ import annotations

import enum
import textwrap


class ExitCode(enum.IntEnum):
    """One code per kind of failure, the same in every command (EXIT_CODE_HELP says what each means, in `--help`)."""

    OK = 0
    CHECK_FAILED = 1
    USAGE = 2
    BAD_DATA = 3
    NETWORK = 4
    HASH_MISMATCH = 5
    TOOLCHAIN = 6
    BUILD_FAILED = 7
    INTERNAL = 70  # sysexits' EX_SOFTWARE
    INTERRUPTED = 130


EXIT_CODE_HELP = {
    ExitCode.OK: "success",
    ExitCode.CHECK_FAILED: "a check found a problem (doctor, smoke, bench, accuracy, serve check, inspect, wheel diff), "
    "including a server under test that is down or answers wrongly",
    ExitCode.USAGE: "bad command line or input file, or an output that cannot be written",
    ExitCode.BAD_DATA: "a data file of the project (pins, profile, recipe, rules) is malformed",
    ExitCode.NETWORK: "a package index or a download could not be reached",
    ExitCode.HASH_MISMATCH: "a file does not match its pin",
    ExitCode.TOOLCHAIN: "a tool is missing or wrong (nix, cmake, nvcc, torch)",
    ExitCode.BUILD_FAILED: "an external build or program failed",
    ExitCode.INTERNAL: "an internal error: a bug of blackwell-stack (BLACKWELL_STACK_TRACEBACK=1 shows where)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C; SIGTERM gives 143, SIGHUP 129)",
}


def exit_codes_help() -> str:
    """The exit code table for `--help`."""
    lines = ["exit codes:"]
    for code, text in EXIT_CODE_HELP.items():
        lines += textwrap.wrap(text, 78, initial_indent=f"  {int(code):<5}", subsequent_indent=" " * 7)
    return "\n".join(lines)


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
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class DataError(StackError):
    """A data file (pins, profile, recipe, rules) is malformed: the message names the file, the entry and the field."""

    code = ExitCode.BAD_DATA

    def __init__(self, path: object, entry: str | None, field: str | None, problem: str, hint: str | None = None):
        where = str(path) + (f": entry {entry!r}" if entry else "") + (f", field {field!r}" if field else "")
        super().__init__(f"{where}: {problem}", hint)
        self.path = path
        self.field = field


class NetworkError(StackError):
    code = ExitCode.NETWORK


class HashMismatch(StackError):
    code = ExitCode.HASH_MISMATCH


class ToolchainError(StackError):
    code = ExitCode.TOOLCHAIN


class BuildError(StackError):
    code = ExitCode.BUILD_FAILED


class CheckFailed(StackError):
    """A check could not pass: the thing checked (a server, a host) is broken or unreachable."""

    code = ExitCode.CHECK_FAILED
