"""The distributions installed in one Python environment, read without importing them.

importlib.metadata over the interpreter's sys.path (asked of that interpreter
once), so a broken install is read instead of crashing, and another
interpreter (a venv's bin/python) can be read from this one. Each
distribution's files (METADATA, RECORD, ...) are read as any outside file is:
regular files only, within a bound (inputfiles.py); importlib.metadata alone
waits forever on a METADATA that is a FIFO and reads a huge one whole.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
from pathlib import Path

from packaging.utils import canonicalize_name

from blackwell_stack import inputfiles, proc
from blackwell_stack.errors import StackError


class Environment:
    """The distributions visible to one interpreter."""

    def __init__(self, python: str | None = None, *, paths: list[str] | None = None):
        """The environment of `python` (asked for its sys.path), or of explicit site directories."""
        self.python = python or sys.executable
        if paths is not None:
            self.python = f"site directories {', '.join(paths)}"
            self.version = sys.version.split()[0]
        elif python:
            try:
                r = proc.run(
                    [python, "-c", "import sys, json; print(json.dumps([sys.version.split()[0], sys.path]))"],
                    check=False, timeout=60,
                )
            except StackError as exc:
                raise StackError(f"cannot run --python {python}: {exc.message}", "pass the path of a python binary") from None
            if r.returncode != 0:
                raise StackError(f"--python {python} failed: {r.stderr.strip()[-300:]}", "pass the path of a working python")
            try:
                self.version, paths = json.loads(r.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError, TypeError):
                raise StackError(f"--python {python} did not answer like a Python interpreter: {r.stdout.strip()[-200:]!r}",
                                 "pass the path of a python binary (a venv's bin/python)") from None
        else:
            self.version, paths = sys.version.split()[0], list(sys.path)
        self.paths = [str(p) for p in paths if p and Path(p).is_dir()]
        self.dists: dict[str, importlib.metadata.Distribution] = {}
        for found in importlib.metadata.distributions(path=self.paths):
            d = _Bounded(found._path) if isinstance(found, importlib.metadata.PathDistribution) else found  # type: ignore[attr-defined]
            name = canonicalize_name(d.metadata["Name"] or "")
            if name and name not in self.dists:
                self.dists[name] = d

    def get(self, name: str):
        return self.dists.get(canonicalize_name(name))


class _Bounded(importlib.metadata.PathDistribution):
    """A distribution whose metadata files are read through inputfiles: a FIFO or a file beyond the bound is a
    StackError naming it, not a hang or a whole read."""

    def read_text(self, filename: str | os.PathLike[str]) -> str | None:
        path = Path(str(self._path)) / filename  # type: ignore[attr-defined]
        try:
            return inputfiles.read_text(path, limit=inputfiles.TEXT_FILE_LIMIT, errors="replace",
                                        what="the installed distribution's file",
                                        hint="that installation is damaged: reinstall the package")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
