"""Long commands show progress on a terminal, and stay quiet when stderr is a pipe or a file."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import zipfile

import pytest
from support.index_server import build_wheel

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def run_with_terminal_stderr(*argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, what a terminal on stderr showed)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": SRC}
    child = subprocess.Popen([sys.executable, "-m", "blackwell_stack", *argv], stdout=subprocess.PIPE,
                             stderr=follower, env=env)
    os.close(follower)
    shown = b""
    while True:
        try:
            data = os.read(leader, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        shown += data
    out = child.communicate(timeout=600)[0]
    os.close(leader)
    return child.returncode, out.decode(), shown.decode(errors="replace")


@pytest.fixture(scope="module")
def two_wheels(tmp_path_factory):
    work = tmp_path_factory.mktemp("progress")
    first = build_wheel(work, "demo", "1.0", payload="A = 1\n")
    second = work / "second" / first.name
    second.parent.mkdir()
    with zipfile.ZipFile(first) as src, zipfile.ZipFile(second, "w") as out:
        for info in src.infolist():
            out.writestr(info, src.read(info), compress_type=zipfile.ZIP_STORED)
    return first, second


def test_inspect_shows_progress_on_a_terminal(two_wheels):
    code, out, shown = run_with_terminal_stderr("inspect", str(two_wheels[0]))
    assert code == 0, shown
    assert "inspecting 0 ELF files" in shown and "checking RECORD" in shown
    assert "checking RECORD" not in out  # progress never goes to stdout


def test_wheel_diff_shows_progress_on_a_terminal(two_wheels):
    code, _out, shown = run_with_terminal_stderr("wheel", "diff", *map(str, two_wheels))
    assert code == 1  # same files, stored differently
    assert "hashing both wheels" in shown and "comparing" in shown and "members" in shown


def test_no_progress_when_stderr_is_not_a_terminal(two_wheels):
    env = {**os.environ, "PYTHONPATH": SRC}
    result = subprocess.run([sys.executable, "-m", "blackwell_stack", "wheel", "diff", *map(str, two_wheels)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert "hashing" not in result.stderr and "\r" not in result.stderr


def test_doctor_abi_shows_progress_on_a_terminal(tmp_path):
    """A kernel library and a torch library made here by gcc: one c10:: symbol needed, one defined."""
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("no C compiler to build shared libraries")
    lib = tmp_path / "torch" / "lib"
    kernel = tmp_path / "kernel" / "sgl_kernel"
    lib.mkdir(parents=True)
    kernel.mkdir(parents=True)
    symbol = "_ZN3c104cuda5probeEv"  # c10::cuda::probe()
    (tmp_path / "c10.c").write_text(f"void {symbol}(void) {{}}\n")
    (tmp_path / "ops.c").write_text(f"extern void {symbol}(void);\nvoid ops(void) {{ {symbol}(); }}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib / "libc10.so"), str(tmp_path / "c10.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(kernel / "ops.abi3.so"), str(tmp_path / "ops.c"),
                    f"-L{lib}", "-lc10"], check=True)
    code, out, shown = run_with_terminal_stderr("doctor", "abi", "--kernel", str(kernel), "--torch", str(lib))
    assert code == 0, out + shown
    assert "torch symbols: 1 of 1 resolve" in out
    assert "inspecting 1 ELF files" in shown and "reading the symbol tables of 1 torch libraries" in shown
