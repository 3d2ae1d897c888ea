"""Shared fixtures: the real `nix`, real PyPI artifacts (cached), the repo root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# What the CLI reads as data (src/blackwell_stack/paths.py): a copy of these is
# a root for BLACKWELL_STACK_ROOT that a test may break.
DATA_PARTS = ("pkgs", "modules", "patches", "nix", "stacks", "docs")


def copy_data_root(dest: Path) -> Path:
    """The project's data files copied under dest (a throw-away BLACKWELL_STACK_ROOT)."""
    for part in DATA_PARTS:
        shutil.copytree(REPO / part, dest / part, ignore=shutil.ignore_patterns("wheels", ".venv"))
    shutil.copy(REPO / "flake.lock", dest / "flake.lock")
    return dest


# What the programs the tests run (the CLI, argparse, CMake, compilers, uv)
# take from the terminal and the locale of whoever runs the suite: their
# messages would wrap at $COLUMNS or come translated. Tests that are about
# those settings set them themselves.
_RUNNER_SETTINGS = ("COLUMNS", "LINES", "LANGUAGE")


@pytest.fixture(scope="session", autouse=True)
def _same_terminal_and_locale_everywhere():
    saved = {name: os.environ.pop(name) for name in _RUNNER_SETTINGS if name in os.environ}
    saved_lc_all = os.environ.get("LC_ALL")
    os.environ["LC_ALL"] = "C.UTF-8"
    yield
    os.environ.update(saved)
    if saved_lc_all is None:
        os.environ.pop("LC_ALL", None)
    else:
        os.environ["LC_ALL"] = saved_lc_all


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


class Nix:
    """Evaluates Nix expressions with the real nix-instantiate (builtins only, no nixpkgs)."""

    def __init__(self, binary: str):
        self.binary = binary

    def eval(self, expr: str, *, raw: bool = False):
        """Evaluate expr (strictly) with the repo root as ./ and return it as Python data."""
        argv = [self.binary, "--eval", "--strict", "--expr", expr]
        if not raw:
            argv.append("--json")
        result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise NixEvalError(result.stderr)
        return result.stdout if raw else json.loads(result.stdout)

    def eval_error(self, expr: str) -> str:
        """Evaluate expr, expecting it to fail; return nix's error text."""
        result = subprocess.run(
            [self.binary, "--eval", "--strict", "--json", "--expr", expr],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode != 0, f"expected evaluation to fail, got {result.stdout[:500]}"
        return result.stderr


class NixEvalError(Exception):
    pass


@pytest.fixture(scope="session")
def nix() -> Nix:
    binary = shutil.which("nix-instantiate")
    if binary is None:
        pytest.skip("nix-instantiate is not installed (apt-get install nix-bin); .ci/run installs it")
    return Nix(binary)


@pytest.fixture(scope="session")
def pypi_file():
    """pypi_file(name, version, pattern) -> Path of a real PyPI file, cached under the user cache dir."""
    from blackwell_stack import pypi

    def get(name: str, version: str, pattern: str = "*.whl") -> Path:
        return pypi.fetch(name, version, pattern)

    return get
