"""Writes that leave nothing half-written behind, with the modes a user expects.

Every file the CLI writes goes through `atomic_file`: it is written beside its destination and renamed into place
only when complete. A destination that exists and is not a regular file (a device such as /dev/null, a FIFO, a
socket) is refused: the rename would put a file in its place for every program on the host. A file that replaces
another keeps that file's mode; a new one gets 0666 less the umask, as any program's new file does. Outputs named on
the command line are checked with `check_output_path` before the work that produces them starts, so a sweep or a
download is not wasted on a path that cannot be written.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from blackwell_stack import inputfiles
from blackwell_stack.errors import StackError


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (/proc/self/status)."""
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode_for(path: Path) -> int:
    """The replaced file's own mode, or what a new file gets under the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~current_umask()


def write_error(path: Path, exc: OSError) -> StackError:
    """A StackError for an OSError met while writing `path`, saying what to do."""
    return StackError(f"cannot write {path}: {exc.strerror or exc}",
                      f"write to a path in a directory you can write to ({path.parent} is not usable)")


def refuse_special(path: Path, option: str | None) -> None:
    """A StackError when path exists and is not a regular file (through symlinks): never replaced by a rename."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # nothing there yet (or nothing the write will not report itself)
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        label = f"{option} {path}" if option else str(path)
        raise StackError(f"{label} is {inputfiles.kind(mode)}, not a regular file: it is not replaced",
                         "pass the path of a regular file (or of one to create)")


@contextlib.contextmanager
def atomic_file(path: str | Path, suffix: str = ".tmp") -> Iterator[IO[bytes]]:
    """A binary file that appears at `path` only if the `with` block completes (on any exception `path` is left as
    it was); failures to create, flush or rename it become a StackError naming the path."""
    path = Path(path)
    refuse_special(path, None)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    except OSError as exc:
        raise write_error(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            try:
                fh.flush()
                os.fsync(fh.fileno())
                os.fchmod(fh.fileno(), _mode_for(path))
                fh.close()
                os.replace(tmp, path)
            except OSError as exc:
                raise write_error(path, exc) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_file(path) as fh:
        fh.write(data)


def atomic_write_json(path: str | Path, data: Any) -> None:
    atomic_write_bytes(path, (json.dumps(data, indent=2) + "\n").encode())


def check_output_path(path: str | Path, option: str) -> Path:
    """Refuse, before any work, an output path that cannot be written.

    `option` names where the path came from (`--out`) for the message. The
    directory is probed by creating and removing a temporary file in it: the
    only test that also holds for read-only mounts and for root.
    """
    path = Path(path)
    hint = f"pass {option} a file path in a directory you can write to"
    if path.is_dir():
        raise StackError(f"{option} {path} is a directory", hint)
    refuse_special(path, option)
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise StackError(f"{option} {path}: {existing} is not a directory", hint)
    # Where the file, or the first directory atomic_file has to create, will be made.
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=existing)
    except OSError as exc:
        raise StackError(f"{option} {path}: cannot write in {existing} ({exc.strerror or exc})", hint) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return path
