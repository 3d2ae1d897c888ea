"""`stack lock`: the real uv (the pinned 0.10.7) against real PyPI.

- the locks made from PyPI (stable, current) are current with their pyproject.toml (`uv lock --check`);
- a stack that keeps wheels locally (the nightly's design) locks against a
  directory holding them: shown on a small stack of the same shape with a
  real PyPI wheel in the kept directory, the lock records path and sha256,
  `uv sync --frozen` installs from it, and the audit lists it as kept;
- refusals: the wrong uv, no Python 3.12, a lock without hashes; the old lock
  is left as it was.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO
from support.uv_venv import NO_DOWNLOADS, make_venv, uv_or_skip

from blackwell_stack.cli import main
from blackwell_stack.data import stack as stack_data
from blackwell_stack.errors import CheckFailed, StackError, ToolchainError
from blackwell_stack.stacks import libraries
from blackwell_stack.stacks import lock as locking

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process


def _uv_or_skip(stack: stack_data.Stack) -> str:
    uv_or_skip()
    try:
        return locking.uv_binary(stack)
    except ToolchainError as exc:
        pytest.skip(exc.message)


def _python312_or_skip() -> str:
    try:
        return locking.find_python("3.12")
    except ToolchainError as exc:
        pytest.skip(exc.message)


@pytest.mark.network
@pytest.mark.parametrize("name", [n for n in stack_data.names() if stack_data.load(n).locked and not locking.kept_index_used(stack_data.load(n))])
def test_a_pypi_lock_is_current_with_pypi(capsys, name):
    stack = stack_data.load(name)
    _uv_or_skip(stack)
    _python312_or_skip()
    before = stack.lock_path.read_bytes()
    assert main(["stack", "lock", name, "--check"]) == 0
    assert "is current" in capsys.readouterr().out
    assert stack.lock_path.read_bytes() == before


def _mini_stack(root: Path, kept: bool) -> stack_data.Stack:
    """A stack of the nightly's shape: one package (packaging) from a local kept-wheels index, or from PyPI."""
    path = root / "stacks" / "mini"
    path.mkdir(parents=True)
    index = '\n[[tool.uv.index]]\nname = "kept"\nurl = "./wheels/simple"\nexplicit = true\n\n[tool.uv.sources]\npackaging = { index = "kept" }\n'
    (path / "pyproject.toml").write_text(
        '[project]\nname = "mini"\nversion = "0"\nrequires-python = "==3.12.*"\ndependencies = ["packaging==24.2", "sgl-kernel"]\n\n'
        '[tool.uv]\npackage = false\nenvironments = ["sys_platform == \'linux\' and platform_machine == \'x86_64\'"]\n'
        'exclude-dependencies = ["sgl-kernel"]\n' + (index if kept else ""))
    data = json.loads((REPO / "stacks" / "stable" / "stack.json").read_text())
    data.update(name="mini", default=False, versions_from_lock={"sglang": "packaging", "flashinfer": "packaging",
                                                                "torch": "packaging"},
                torch_pairs={}, lock={"command": "blackwell-stack stack lock mini --wheels DIR", "missing_reason": None},
                kept_wheels={"url_template": "https://example.invalid/{filename}", "why": "test"})
    return stack_data.Stack("mini", path, data)


@pytest.mark.network
def test_a_stack_locks_against_a_directory_of_kept_wheels(tmp_path, pypi_file):
    stack = _mini_stack(tmp_path, kept=True)
    _uv_or_skip(stack)
    python = _python312_or_skip()
    kept = tmp_path / "kept"
    kept.mkdir()
    wheel = pypi_file("packaging", "24.2", "packaging-24.2-py3-none-any.whl")
    shutil.copy(wheel, kept / wheel.name)
    lock = locking.lock(stack, python=python, wheels=kept)
    pkg = lock.get("packaging")
    assert pkg.source == {"registry": "wheels/simple"}
    (entry,) = pkg.wheels
    assert entry["path"] == f"../{wheel.name}"
    assert entry["hash"] == "sha256:" + __import__("hashlib").sha256(wheel.read_bytes()).hexdigest()
    # The kept file is what the audit reads (sha256 checked) and lists for Nix's fixed-output fetch.
    audit = libraries.audit(stack, lock, libraries.read_all(stack, lock))
    assert audit["kept_wheels"] == {"packaging": {"file": wheel.name, "hash": entry["hash"]}}
    assert audit["files"]["packaging"]["checked"].startswith("hashed from the kept file")
    # uv installs the same file from the same lock.
    venv = tmp_path / "venv"
    make_venv(venv, python)
    subprocess.run([uv_or_skip(), "sync", "-q", "--frozen", "--project", str(stack.path)], check=True, timeout=600,
                   env={"UV_PROJECT_ENVIRONMENT": str(venv), **NO_DOWNLOADS})
    assert list(venv.glob("lib/python3.12/site-packages/packaging-24.2.dist-info"))


@pytest.mark.network
def test_without_the_kept_wheels_the_lock_is_refused_and_nothing_changes(tmp_path):
    stack = _mini_stack(tmp_path, kept=True)
    _uv_or_skip(stack)
    python = _python312_or_skip()
    with pytest.raises(StackError) as info:
        locking.lock(stack, python=python)
    assert "takes some wheels from a local directory" in info.value.message
    assert info.value.hint == "run `blackwell-stack stack lock mini --wheels DIR`"
    assert not stack.lock_path.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(StackError) as info:
        locking.lock(stack, python=python, wheels=empty)
    assert "no .whl files there" in info.value.message
    assert not stack.lock_path.exists()


def _locked_then_repinned(tmp_path, packaging: str):
    """The mini stack locked by real uv, then its pyproject.toml changed to pin packaging==`packaging`:
    (stack, python, the lock's bytes before)."""
    stack = _mini_stack(tmp_path, kept=False)
    _uv_or_skip(stack)
    python = _python312_or_skip()
    locking.lock(stack, python=python)
    before = stack.lock_path.read_bytes()
    text = (stack.path / "pyproject.toml").read_text()
    (stack.path / "pyproject.toml").write_text(text.replace("packaging==24.2", f"packaging=={packaging}"))
    return stack, python, before


@pytest.mark.network
def test_a_failed_uv_lock_leaves_the_old_lock(tmp_path):
    stack, python, before = _locked_then_repinned(tmp_path, "0.0.0.404")
    with pytest.raises(StackError) as info:
        locking.lock(stack, python=python)
    assert "uv could not lock the mini stack" in info.value.message and "old uv.lock" in info.value.hint
    assert stack.lock_path.read_bytes() == before


@pytest.mark.network
def test_a_stale_lock_fails_the_check_with_the_check_code_and_stays(tmp_path):
    """`--check` is a check: a lock that is not current gives 1 (the table in --help), not a usage error."""
    stack, python, before = _locked_then_repinned(tmp_path, "24.1")
    with pytest.raises(CheckFailed) as info:
        locking.lock(stack, python=python, check=True)
    assert info.value.code == 1 and "is not current" in info.value.message
    assert info.value.hint == "lock it again: blackwell-stack stack lock mini --wheels DIR"
    assert stack.lock_path.read_bytes() == before


def test_the_wrong_uv_is_refused_with_the_version_to_install(tmp_path):
    fake = tmp_path / "uv"
    fake.write_text("#!/bin/sh\necho 'uv 0.9.0'\n")
    fake.chmod(0o755)
    with pytest.raises(ToolchainError) as info:
        locking.uv_binary(stack_data.load("stable"), str(fake))
    assert "uv 0.9.0" in info.value.message and "uv-bin of the locked uv2nix" in info.value.message
    assert info.value.hint == "install the uv the stack names: python3 -m pip install 'uv==0.10.7'"


def test_a_python_that_is_not_3_12_is_refused():
    with pytest.raises(ToolchainError) as info:
        locking.find_python("3.12", sys.executable if sys.version_info[:2] != (3, 12) else "/nonexistent/python")
    assert "not a working Python 3.12" in info.value.message and "--python" in info.value.hint


def test_a_lock_without_hashes_is_refused(tmp_path):
    stack = stack_data.load("stable")
    lock = stack.lock()
    pkg = lock.get("packaging")
    pkg.wheels[0].pop("hash")
    with pytest.raises(StackError) as info:
        locking.validate(stack, lock)
    assert "packaging 26.4" in info.value.message and "has no sha256" in info.value.message


def test_cli_errors_say_what_failed_and_what_to_do(capsys):
    assert main(["stack", "lock", "stable", "--wheels", "/nonexistent", "--uv", "/nonexistent/uv"]) == 6
    err = capsys.readouterr().err
    assert err.startswith("error: cannot run /nonexistent/uv: ") and "\n  hint: install uv and try again" in err
    assert main(["plan", "--stack", "nope"]) == 2
    assert capsys.readouterr().err == ("error: there is no stack 'nope' (stacks/nope/stack.json)\n"
                                       "  hint: pick one of: stable, current, nightly\n")
