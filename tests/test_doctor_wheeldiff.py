"""`wheel diff`: this project's own wheel built twice is bit for bit identical; each kind of difference is named.

The wheels are real builds: flit-core (this project's build backend) on a
snapshot of the source, and shared libraries compiled here by gcc.
"""

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
from support.cli import run as cli

from blackwell_stack.formats import wheeldiff

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

EPOCH = "1772542754"  # the nixpkgs pin's lastModified; any fixed value does


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    """A frozen copy of what the wheel is built from (other work in the checkout cannot change it mid-test)."""
    pytest.importorskip("flit_core.buildapi", reason="flit-core (the build backend) is not installed")
    d = tmp_path_factory.mktemp("src") / "blackwell-stack"
    d.mkdir()
    for name in ("pyproject.toml", "README.md"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, d / name)
    shutil.copytree(REPO / "src", d / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return d


def build(src: Path, out: Path, epoch: str = EPOCH) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SOURCE_DATE_EPOCH": epoch}
    r = subprocess.run(
        [sys.executable, "-c", "import sys, flit_core.buildapi as b; print(b.build_wheel(sys.argv[1]))", str(out)],
        cwd=src, env=env, capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return out / r.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def first_build(snapshot, tmp_path_factory) -> Path:
    return build(snapshot, tmp_path_factory.mktemp("build-a"))


def test_own_wheel_builds_bit_for_bit(snapshot, first_build, tmp_path):
    second = build(snapshot, tmp_path / "build-b")
    result = cli("wheel", "diff", str(first_build), str(second), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["identical"] and data["verdict"] == "identical"
    assert data["sha256_a"] == data["sha256_b"]


def test_rebuild_with_other_timestamp_differs_only_in_zip_metadata(snapshot, first_build, tmp_path):
    later = build(snapshot, tmp_path / "later", epoch="1800000000")
    data = wheeldiff.diff(first_build, later)
    assert not data["identical"]
    assert data["verdict"] == "zip-metadata"
    assert all(m["class"] == "zip-metadata" and m["detail"].startswith("timestamp") for m in data["members"])
    result = cli("wheel", "diff", str(first_build), str(later))
    assert result.returncode == 1 and "worst: zip-metadata" in result.stdout


def test_changed_file_is_content_and_record(snapshot, first_build, tmp_path):
    changed = tmp_path / "changed"
    shutil.copytree(snapshot, changed)
    init = changed / "src" / "blackwell_stack" / "__init__.py"
    init.write_text(init.read_text() + "# changed\n")
    data = wheeldiff.diff(first_build, build(changed, tmp_path / "out"))
    by_name = {m["name"]: m for m in data["members"]}
    assert by_name["blackwell_stack/__init__.py"]["class"] == "content"
    record = next(m for n, m in by_name.items() if n.endswith(".dist-info/RECORD"))
    assert record["class"] == "record" and "blackwell_stack/__init__.py" in record["detail"]
    assert data["verdict"] == "content"
    assert data["classes"] == {"content": 1, "record": 1}


def test_changed_permissions(snapshot, first_build, tmp_path):
    changed = tmp_path / "perm"
    shutil.copytree(snapshot, changed)
    (changed / "src" / "blackwell_stack" / "cli" / "__init__.py").chmod(0o755)
    data = wheeldiff.diff(first_build, build(changed, tmp_path / "out"))
    cli_entry = next(m for m in data["members"] if m["name"] == "blackwell_stack/cli/__init__.py")
    assert cli_entry["class"] == "zip-metadata" and "permissions" in cli_entry["detail"]


# -- ELF members -------------------------------------------------------------

C_SOURCE = 'const char *where = __FILE__;\nint answer(void) { return %d; }\n'


def _gcc() -> str:
    found = shutil.which("gcc") or shutil.which("cc")
    if found is None:
        pytest.skip("no C compiler to build shared libraries")
    return found


def _lib(workdir: Path, *, value: int = 42, build_id: str = "0x0102", debug: bool = False) -> bytes:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "lib.c").write_text(C_SOURCE % value)
    flags = ["-shared", "-fPIC", "-O1", f"-Wl,--build-id={build_id}"] + (["-g"] if debug else [])
    subprocess.run([_gcc(), *flags, str(workdir / "lib.c"), "-o", str(workdir / "libx.so")], check=True, timeout=120)
    return (workdir / "libx.so").read_bytes()


def _wheel(path: Path, lib: bytes) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("x-1.0.dist-info/WHEEL", (2026, 1, 1, 0, 0, 0)), "Wheel-Version: 1.0\n")
        zf.writestr(zipfile.ZipInfo("x/libx.so", (2026, 1, 1, 0, 0, 0)), lib)
    return path


def _member_class(a: bytes, b: bytes, tmp_path: Path) -> dict:
    data = wheeldiff.diff(_wheel(tmp_path / "a.whl", a), _wheel(tmp_path / "b.whl", b))
    (member,) = data["members"]
    return member


def test_elf_build_id_only(tmp_path):
    a = _lib(tmp_path / "same", build_id="0x0102")
    b = _lib(tmp_path / "same", build_id="0x0304")
    assert a != b
    assert _member_class(a, b, tmp_path)["class"] == "build-id"


def test_elf_embedded_build_path(tmp_path):
    # Same length paths: __FILE__ in .rodata and the debug info differ, the code does not.
    a = _lib(tmp_path / "build-1", debug=True)
    b = _lib(tmp_path / "build-2", debug=True)
    m = _member_class(a, b, tmp_path)
    assert m["class"] == "build-paths", m


def test_elf_code_change(tmp_path):
    a = _lib(tmp_path / "same", value=42)
    b = _lib(tmp_path / "same", value=43)
    m = _member_class(a, b, tmp_path)
    assert m["class"] == "content", m
