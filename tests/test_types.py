"""The type checker over the whole package (CI runs it as part of the tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

SRC = Path(__file__).resolve().parent.parent / "src"


def test_mypy_is_clean():
    result = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--no-error-summary", str(SRC)],
                            capture_output=True, text=True, timeout=900)
    if "No module named mypy" in result.stderr:
        raise AssertionError("mypy is not installed: pip install -e '.[test]' (it is in the test extra)")
    assert result.returncode == 0, result.stdout + result.stderr
