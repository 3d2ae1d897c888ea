"""Writes that leave nothing half-written behind."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_file(path: str | Path, suffix: str = ".tmp") -> Iterator[IO[bytes]]:
    """A binary file that appears at `path` only if the `with` block completes.

    It is written beside `path` and renamed into place; on any exception the
    temporary file is removed and `path` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_file(path) as fh:
        fh.write(data)


def atomic_write_json(path: str | Path, data: Any) -> None:
    text = json.dumps(data, indent=2, sort_keys=False) + "\n"
    atomic_write_bytes(path, text.encode())
