"""The linter over the package and its tests (CI runs it as part of the tests, as it runs mypy).

Its rules are in pyproject.toml ([tool.ruff]); ruff is pinned to a minor release in the test extra so that a new
release cannot add rules under a green commit.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import REPO

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process


def test_ruff_is_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                             "src", "tests", "benchmarks", "scripts"], cwd=REPO, capture_output=True, text=True, timeout=300)
    if "No module named ruff" in result.stderr:
        raise AssertionError("ruff is not installed: pip install -e '.[test]' (it is in the test extra)")
    assert result.returncode == 0, result.stdout + result.stderr
