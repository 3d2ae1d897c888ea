"""Shared fixtures: the real `nix`, real PyPI artifacts (cached), the repo root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support import REPO

# A test with none of these markers is `fast` (`pytest -m fast`: the parsers, the registry, render, rules,
# the plan, in-process CLI calls): it starts no process, downloads nothing and needs no toolchain. The guard
# below holds the mark to the truth: a fast test that starts a process fails, naming the marker it lacks.
HEAVY_MARKERS = ("network", "nix", "cuda", "slow", "rehearsal", "proc")
_SPAWNERS = ((subprocess.Popen, "_execute_child"), (os, "fork"), (os, "posix_spawn"), (os, "posix_spawnp"),
             (os, "system"))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if not any(item.get_closest_marker(name) for name in HEAVY_MARKERS):
            item.add_marker(pytest.mark.fast)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if item.get_closest_marker("fast") is None:
        yield
        return
    record = os.environ.get("BLACKWELL_STACK_RECORD_SPAWNS")
    saved = [(owner, name, getattr(owner, name)) for owner, name in _SPAWNERS if hasattr(owner, name)]

    def guard(original, name):
        def spawn(*args, **kwargs):
            if record:
                with open(record, "a") as out:
                    out.write(item.nodeid + "\n")
                return original(*args, **kwargs)
            pytest.fail(f"{item.nodeid} starts a process ({name}); mark it @pytest.mark.proc, or keep it in process",
                        pytrace=False)
        return spawn

    for owner, name, original in saved:
        setattr(owner, name, guard(original, name))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)

def cli_files() -> list[Path]:
    """Every data file the CLI reads that is there now, outside the package: what its Nix package carries."""
    from blackwell_stack.data import registry

    return sorted(p for f in registry.FILES if "cli" in f.read_by and not f.in_package for p in f.files())


def copy_data_root(dest: Path) -> Path:
    """The data files the CLI reads (data/registry.py: exactly what its Nix package carries), copied under
    dest: a throw-away BLACKWELL_STACK_ROOT that a test may break."""
    for path in cli_files():
        target = dest / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return dest


# What the programs the tests run (the CLI, argparse, CMake, compilers, uv)
# take from the terminal and the locale of whoever runs the suite: their
# messages would wrap at $COLUMNS or come translated. Tests that are about
# those settings set them themselves.
_RUNNER_SETTINGS = ("COLUMNS", "LINES", "LANGUAGE")


@pytest.fixture(scope="session", autouse=True)
def _same_terminal_and_locale_everywhere():
    saved = {name: os.environ.pop(name) for name in _RUNNER_SETTINGS if name in os.environ}
    for name in _RUNNER_SETTINGS:
        # GNU readline, once imported (by pdb, for one), exports COLUMNS and LINES behind os.environ's back.
        os.unsetenv(name)
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
    """pypi_file(name, version, pattern) -> Path of a real PyPI file, cached under the user cache dir and
    verified by PyPI's sha256."""
    from blackwell_stack import pypi
    from blackwell_stack.download import download
    from blackwell_stack.hashes import sha256_file
    from blackwell_stack.paths import cache_dir

    def get(name: str, version: str, pattern: str = "*.whl") -> Path:
        f = pypi.pick(pypi.release_files(name, version), pattern)
        dest = cache_dir("pypi", name.lower(), version) / f.filename
        if not (dest.exists() and dest.stat().st_size == f.size and sha256_file(dest) == f.sha256):
            download(f.url, dest, expected_sha256=f.sha256, expected_size=f.size)
        return dest

    return get


@pytest.fixture(scope="session")
def msgspec_path(pypi_file, tmp_path_factory):
    """The real msgspec from PyPI, unpacked for the Python running the tests: sglang 0.5.23's parser needs it."""
    tag = f"{sys.version_info.major}{sys.version_info.minor}"
    wheel = pypi_file("msgspec", "0.22.0", f"msgspec-0.22.0-cp{tag}-cp{tag}-manylinux2014_x86_64*.whl")
    out = tmp_path_factory.mktemp("msgspec")
    zipfile.ZipFile(wheel).extractall(out)
    return out


@pytest.fixture(scope="session")
def rehearsal(tmp_path_factory):
    """The Nix rehearsal's shared pieces (tests/support/rehearsal/session.py): CUDA components, torch, tools; built on first use."""
    from support.rehearsal import session as rehearsal_module

    return rehearsal_module.Session(tmp_path_factory.mktemp("rehearsal"))
