"""What escapes a command: one message and one exit code (errors.ExitCode), never a traceback.

The project's own errors carry their message, hint and code. Anything else is
sorted here, once for every command, by what it is and by what raised it:

- an operating-system error, by its errno: the network (exit 4), a full disk,
  a failing device, memory, permissions, a path (exit 2), each with the hint
  that fits it and the path when the error has one;
- RecursionError and MemoryError: an input nested too deeply, or too large,
  to read;
- an error raised inside one of the standard library's readers of outside
  bytes (zip archives, JSON, TOML, URLs, host names, HTTP answers, ...): an
  input that cannot be read, named by its reader, exit 2 (4 for an answer from
  the network);
- anything else is a bug of blackwell-stack: "internal error", exit 70, and
  how to see its traceback (BLACKWELL_STACK_TRACEBACK=1 re-raises it).
"""

from __future__ import annotations

import errno
import http.client
import socket
import traceback
import urllib.error
from dataclasses import dataclass

from blackwell_stack.errors import ExitCode, StackError

TRACEBACK_ENV = "BLACKWELL_STACK_TRACEBACK"

# The standard library's readers of outside bytes, by the module that raised (the innermost Python frame), and
# what a person calls what they read.
READERS = {
    "zipfile": "a zip archive (wheel)", "tarfile": "a tar archive", "gzip": "gzip data", "lzma": "xz data",
    "bz2": "bzip2 data", "json": "JSON", "tomllib": "TOML", "email": "a metadata file", "csv": "CSV",
    "shlex": "a shell-quoted line", "base64": "base64 data", "urllib": "a URL", "ipaddress": "an address",
    "encodings.idna": "a host name", "socket": "a host name or address", "http.client": "an HTTP answer",
}

_NETWORK_ERRNOS = {errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED, errno.ETIMEDOUT, errno.EHOSTUNREACH,
                   errno.ENETUNREACH, errno.ENETDOWN, errno.EHOSTDOWN}
_NETWORK_HINT = "check the address, and that the server or index can be reached from this host"
_HINTS = {
    (errno.ENOSPC, errno.EDQUOT, errno.EFBIG): "free space on that disk, or write to another one",
    (errno.EIO,): "the disk or device behind it failed a read or write: check it (the kernel log says more)",
    (errno.ENOMEM,): "the machine ran out of memory: close other programs, or use a machine with more",
    (errno.EACCES, errno.EPERM, errno.EROFS): "check the permissions of that path (or whether its file system is "
                                              "mounted read-only)",
    (errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ELOOP, errno.ENAMETOOLONG): "check that path",
    (errno.EMFILE, errno.ENFILE): "too many open files: raise the limit (ulimit -n)",
}


@dataclass(frozen=True)
class Failure:
    message: str  # with its hint, as StackError prints it
    code: ExitCode


def describe(exc: BaseException) -> Failure:
    """The message and exit code for an exception that escaped a command (KeyboardInterrupt is the caller's)."""
    if isinstance(exc, StackError):
        return Failure(str(exc), exc.code)
    if isinstance(exc, urllib.error.URLError):  # an OSError with no errno: the reason is the network's
        return _failure(f"network error: {exc.reason}", _NETWORK_HINT, ExitCode.NETWORK)
    # A gzip/zip/tar format error may be an OSError (gzip.BadGzipFile) with no errno: a reader's, not the system's.
    if isinstance(exc, OSError) and not (exc.errno is None and _reader(exc) is not None):
        return _os_error(exc)
    if isinstance(exc, RecursionError):
        return _failure("an input is nested too deeply to read (Python's recursion limit)",
                        "check the file, answer or directory the command was reading: no real one nests this deep",
                        ExitCode.USAGE)
    if isinstance(exc, MemoryError):
        return _failure("out of memory while reading an input",
                        "check the size of the files the command was given", ExitCode.USAGE)
    if (reader := _reader(exc)) is not None:
        network = isinstance(exc, http.client.HTTPException) or reader == "http.client"
        return _failure(f"{READERS[reader]} that cannot be read: {_text(exc)}",
                        "the server's answer was cut short or malformed: check the server, then try again" if network
                        else "check that input (the message names what was wrong with it)",
                        ExitCode.NETWORK if network else ExitCode.USAGE)
    return _failure(f"internal error: {_text(exc)}",
                    f"this is a bug in blackwell-stack: run the command again with {TRACEBACK_ENV}=1 to see where, "
                    "and report it", ExitCode.INTERNAL)


def _failure(message: str, hint: str, code: ExitCode) -> Failure:
    return Failure(str(StackError(message, hint)), code)


def _text(exc: BaseException) -> str:
    said = str(exc)
    return f"{type(exc).__name__}: {said}" if said else type(exc).__name__


def _reader(exc: BaseException) -> str | None:
    """The READERS entry of the module that raised exc, if a reader raised it (http.client's errors always)."""
    if isinstance(exc, http.client.HTTPException):
        return "http.client"
    cause: BaseException | None = exc
    for _ in range(8):  # a codec's error is re-raised from C with the reader's as its cause
        if cause is None:
            break
        frames = list(traceback.walk_tb(cause.__traceback__))
        module = str(frames[-1][0].f_globals.get("__name__", "")) if frames else ""
        found = next((name for name in READERS if module == name or module.startswith(name + ".")), None)
        if found:
            return found
        cause = cause.__cause__
    return None


def _os_error(exc: OSError) -> Failure:
    where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
    reason = exc.strerror or _text(exc)
    if isinstance(exc, (socket.gaierror, socket.herror, TimeoutError)) or exc.errno in _NETWORK_ERRNOS:
        return _failure(f"network error: {reason}{where}", _NETWORK_HINT, ExitCode.NETWORK)
    hint = next((text for numbers, text in _HINTS.items() if exc.errno in numbers),
                "check that path" if where else "check the paths the command was given and the disk they are on")
    return _failure(f"{reason}{where}", hint, ExitCode.USAGE)
