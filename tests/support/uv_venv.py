"""Throw-away venvs made and filled by the real uv (a test dependency), never downloading a Python."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# uv may use only an interpreter that is already on this machine.
NO_DOWNLOADS = {"UV_PYTHON_DOWNLOADS": "never", "PATH": "/usr/bin:/bin"}


def uv_or_skip() -> str:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed (a test dependency: pip install -e '.[test]')")
    return uv


def make_venv(path: Path, python: str = sys.executable) -> Path:
    """A venv at `path` for `python`; its bin/python."""
    subprocess.run([uv_or_skip(), "venv", "-q", "--python", python, str(path)], check=True, timeout=300,
                   env=NO_DOWNLOADS)
    return path / "bin" / "python"


def install(python: Path, *requirements: str) -> None:
    """Install exactly these (no dependencies) as copies, so that a test may change the installed files."""
    subprocess.run([uv_or_skip(), "pip", "install", "-q", "--link-mode=copy", "--no-deps", "--python", str(python),
                    *requirements], check=True, timeout=600)
