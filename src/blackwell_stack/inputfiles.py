"""Files the CLI reads: regular files only, and never more than a bound.

A path a user names may be anything: a FIFO with no writer (reading it waits forever), a device (`/dev/zero` never
ends), a file far larger than any the command could need. Every file the CLI reads whole goes through `read_bytes`
or `read_text` with a bound fitted to what it holds (a key: 64 KiB, a data file of the project: 32 MiB); files it
reads in place (wheels, ELF libraries, mapped rather than read into memory) go through `regular_file` first. Both
refuse anything that is not a regular file, with an error that says what the path is, and open it without blocking,
so that a FIFO is refused at once.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from blackwell_stack.errors import StackError

KIB = 1 << 10
MIB = 1 << 20
# The largest data file of the project (a flag table) is under 1 MiB.
DATA_FILE_LIMIT = 32 * MIB
# Any other text the CLI reads whole: a source file of a checkout, the RECORD of an installed distribution.
TEXT_FILE_LIMIT = 64 * MIB

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _label(what: str | None, path: str | Path) -> str:
    return f"{what} {path}" if what else str(path)


def _refuse_kind(path: str | Path, mode: int, what: str | None, hint: str | None) -> StackError:
    return StackError(f"{_label(what, path)} is {kind(mode)}, not a regular file",
                      hint or "pass the path of a regular file")


def regular_file(path: str | Path, what: str | None = None, hint: str | None = None) -> Path:
    """path, when it names a regular file (through symlinks); a StackError saying what it is otherwise."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise StackError(f"{_label(what, path)}: no such file", hint or "check the path") from None
    except OSError as exc:
        raise StackError(f"cannot read {_label(what, path)}: {exc.strerror or exc}", hint or "check the path") from None
    if not stat.S_ISREG(mode):
        raise _refuse_kind(path, mode, what, hint)
    return Path(path)


def read_bytes(path: str | Path, *, limit: int, what: str | None = None, hint: str | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; a StackError for anything else.

    Opened without blocking (a FIFO with no writer is refused, not waited on),
    checked on the open descriptor (no race with a rename), and read up to
    limit + 1 bytes whatever its size claims (a file that grows, /proc).
    FileNotFoundError and IsADirectoryError pass through for callers that say
    more about a missing file; other OSErrors become a StackError.
    """
    fd = None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(info.st_mode):
            raise _refuse_kind(path, info.st_mode, what, hint)
        most = (f"{limit / MIB:.1f} MiB" if limit >= MIB
                else f"{limit / KIB:.0f} KiB" if limit >= KIB else f"{limit} bytes")
        too_big = StackError(f"{_label(what, path)} is larger than {most}, more than it can hold",
                             hint or "check that this is the file you meant")
        if info.st_size > limit:
            raise too_big
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            block = os.read(fd, min(limit + 1 - size, MIB))
            if not block:
                break
            chunks.append(block)
            size += len(block)
        if size > limit:
            raise too_big
        return b"".join(chunks)
    except (FileNotFoundError, IsADirectoryError):
        raise
    except OSError as exc:
        raise StackError(f"cannot read {_label(what, path)}: {exc.strerror or exc}", hint or "check the path") from None
    finally:
        if fd is not None:
            os.close(fd)


def read_text(path: str | Path, *, limit: int, what: str | None = None, hint: str | None = None,
              errors: str = "strict") -> str:
    """read_bytes decoded as UTF-8; a StackError for bytes that are not UTF-8 (with errors="strict")."""
    raw = read_bytes(path, limit=limit, what=what, hint=hint)
    try:
        return raw.decode("utf-8", errors)
    except UnicodeDecodeError as exc:
        raise StackError(f"{_label(what, path)} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                         hint or "check that this is the file you meant") from None
