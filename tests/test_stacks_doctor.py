"""`stack doctor stable --python PY` on a small real venv: a few packages
installed by uv exactly as the stable lock names them, one deliberately at
another version, one that the lock does not have. The doctor names each
difference with the command that repairs it; running that command repairs it.
Files are compared through the locked wheels' own RECORDs (range reads)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO
from support.uv_venv import install, make_venv, uv_or_skip

from blackwell_stack.cli import main
from blackwell_stack.data import lock as lockfile
from blackwell_stack.data import stack as stack_data
from blackwell_stack.data import wheel_choice as wheels

pytestmark = pytest.mark.network

AS_LOCKED = ("sniffio", "idna", "tqdm")
OTHER_VERSION = ("packaging", "24.2")  # the lock has 26.4
NOT_LOCKED = ("six", "1.17.0")


@pytest.fixture
def venv(tmp_path):
    python = make_venv(tmp_path / "venv")
    lock = stack_data.load("stable").lock()
    exact = []
    for name in AS_LOCKED:
        pkg = lock.get(name)
        wheel = wheels.uv_choice(pkg)
        exact.append(f"{name} @ {wheel['url']}#sha256={lockfile.sha256_of(wheel)}")
    install(python, *exact, "==".join(OTHER_VERSION), "==".join(NOT_LOCKED))
    return python


def _doctor(python: Path, capsys, *extra: str) -> tuple[int, dict]:
    code = main(["stack", "doctor", "stable", "--python", str(python), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_each_difference_is_named_with_its_repair(venv, capsys):
    code, report = _doctor(venv, capsys)
    assert code == 1
    by_name = {d["name"]: d for d in report["differences"]}
    for name in AS_LOCKED:
        assert name not in by_name, by_name.get(name)
    mismatch = by_name["packaging"]
    assert (mismatch["kind"], mismatch["locked"], mismatch["installed"]) == ("other version", "26.4", "24.2")
    assert mismatch["repair"].startswith(f"uv pip install --python {venv} --no-deps --reinstall 'packaging @ https://")
    assert "#sha256=" in mismatch["repair"]
    extra = by_name["six"]
    assert extra["kind"] == "not in the lock" and extra["repair"] == f"uv pip uninstall --python {venv} six"
    # Everything else the lock names is missing; the kernel is built from source, never from the lock.
    assert by_name["torch"]["kind"] == "missing"
    kernel = by_name["sgl-kernel"]
    assert kernel["kind"] == "missing" and "blackwell-stack kernel build --stack stable" in kernel["repair"]
    assert report["matched"] == len(AS_LOCKED)
    # The venv is this test's Python, not the stack's 3.12: said first.
    if sys.version_info[:2] != (3, 12):
        assert report["differences"][0]["kind"] == "other python"
        assert report["differences"][0]["repair"].startswith("UV_PYTHON_DOWNLOADS=never uv venv --python 3.12 ")


def test_the_cli_and_pip_the_readme_installs_are_no_difference(venv, capsys):
    """The README puts the CLI (editable, from this checkout) and pip into the serving venv; `uv sync --inexact`
    keeps them, so they are tools beside the lock, not differences from it."""
    install(venv, "pip", "-e", str(REPO))
    _, report = _doctor(venv, capsys)
    assert set(report["tools"]) == {"pip", "blackwell-stack"}
    assert not {"pip", "blackwell-stack"} & {d["name"] for d in report["differences"]}
    assert main(["stack", "doctor", "stable", "--python", str(venv), "-v"]) == 1
    assert "beside the lock, as the README installs them: " in capsys.readouterr().out


def test_a_venv_without_sglang_is_said_to_be_no_serving_venv_in_a_few_lines(venv, capsys):
    assert main(["stack", "doctor", "stable", "--python", str(venv)]) == 1
    out = capsys.readouterr().out
    first, *steps = out.splitlines()
    assert first.startswith(f"{venv} is not a serving venv of the stable stack: sglang is not installed, nor ")
    assert "-v lists each" in first and len(steps) <= 3
    assert any(f"uv sync --frozen --inexact --project {REPO / 'stacks' / 'stable'}" in s for s in steps)
    assert "blackwell-stack kernel build --stack stable" in steps[-1]
    _, report = _doctor(venv, capsys)
    assert report["serving_venv"] is False
    # -v lists every difference, as for a serving venv.
    assert main(["stack", "doctor", "stable", "--python", str(venv), "-v"]) == 1
    assert "repair torch: uv pip install" in capsys.readouterr().out


def test_the_repair_command_repairs(venv, capsys):
    _, report = _doctor(venv, capsys)
    repair = next(d["repair"] for d in report["differences"] if d["name"] == "packaging")
    argv = shlex.split(repair)
    subprocess.run([uv_or_skip(), *argv[1:]], check=True, timeout=600)
    _, report = _doctor(venv, capsys)
    assert "packaging" not in {d["name"] for d in report["differences"]}
    assert report["matched"] == len(AS_LOCKED) + 1


def test_a_file_changed_after_install_shows_with_verify_files(venv, capsys):
    """RECORD still matches the lock; the bytes on disk do not: only --verify-files sees it."""
    (site,) = venv.parent.parent.glob("lib/python3.*/site-packages")
    target = site / "idna" / "core.py"
    target.write_text(target.read_text() + "# changed\n")
    _, report = _doctor(venv, capsys)
    assert "idna" not in {d["name"] for d in report["differences"]}
    _, report = _doctor(venv, capsys, "--verify-files")
    idna = next(d for d in report["differences"] if d["name"] == "idna")
    assert idna["kind"] == "changed on disk" and "idna/core.py" in idna["detail"]


def test_a_rewritten_record_is_another_file_hash(venv, capsys):
    """An installation whose RECORD disagrees with the locked wheel's RECORD (a patched rebuild, say)."""
    (site,) = venv.parent.parent.glob("lib/python3.*/site-packages")
    (record,) = site.glob("sniffio-*.dist-info/RECORD")
    lines = record.read_text().splitlines()
    lines = [line.replace("sha256=", "sha256=X", 1) if line.startswith("sniffio/_impl.py,") else line for line in lines]
    record.write_text("\n".join(lines) + "\n")
    _, report = _doctor(venv, capsys)
    sniffio = next(d for d in report["differences"] if d["name"] == "sniffio")
    assert sniffio["kind"] == "other file hash" and "sniffio/_impl.py" in sniffio["detail"]


def test_an_unknown_stack_and_a_broken_python_are_errors_with_hints(tmp_path, capsys):
    assert main(["stack", "doctor", "nope", "--python", sys.executable]) == 2
    assert "hint: pick one of:" in capsys.readouterr().err
    assert main(["stack", "doctor", "nightly", "--python", sys.executable]) == 2
    err = capsys.readouterr().err
    assert "nightly stack has no lock" in err and "blackwell-stack stack lock nightly --wheels DIR" in err
    assert main(["stack", "doctor", "stable", "--python", str(tmp_path / "no-python")]) == 2
    err = capsys.readouterr().err
    assert "cannot run" in err and "hint:" in err and "Traceback" not in err


def test_without_pypi_and_an_empty_cache_it_says_where_the_records_come_from(venv, tmp_path):
    """The acceptance run's stack doctor step on an offline GPU host met this: each locked wheel's RECORD comes from
    PyPI once, then from the user cache. A process of its own, so that its HTTP client reads the proxy set here."""
    from support import cli as cli_process
    from support.verify_server import free_port

    refused = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "https_proxy", "http_proxy")}
    env.update(https_proxy=refused, HTTPS_PROXY=refused, BLACKWELL_STACK_CACHE=str(tmp_path / "cache"))
    result = cli_process.run("stack", "doctor", "stable", "--python", str(venv), env=env, timeout=300)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "cannot reach https://files.pythonhosted.org/" in result.stderr and "Traceback" not in result.stderr
    assert (f"hint: stack doctor reads each locked wheel's RECORD once, into {tmp_path / 'cache' / 'wheel-records'}"
            in result.stderr)
