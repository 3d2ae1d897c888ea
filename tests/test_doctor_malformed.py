"""Bad input gets a clear message and a meaningful exit code, never a traceback.

Not a wheel, a truncated zip, a corrupt member, a non-ELF .so, a torch
without CUDA libraries, an ELF for another architecture. The inputs are
real files (the sgl-kernel wheel, torch libraries from PyPI) cut, moved or
mislabelled, run through the real CLI.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.cli import run as cli

from blackwell_stack.formats import remote_zip

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

TORCH_ARM = "torch-2.9.1-cp312-cp312-manylinux_2_28_aarch64.whl"
TORCH_X86 = "torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl"


def assert_clean_failure(result: subprocess.CompletedProcess, code: int, *phrases: str) -> str:
    text = result.stdout + result.stderr
    assert "Traceback" not in text, text
    assert result.returncode == code, text
    for p in phrases:
        assert p in text, text
    return text


@pytest.fixture(scope="module")
def sgl_kernel_wheel(pypi_file):
    return pypi_file("sgl-kernel", "0.3.21", "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl")


@pytest.fixture(scope="module")
def kernel_dir(sgl_kernel_wheel, tmp_path_factory) -> Path:
    """sgl_kernel/flashmla_ops.abi3.so (6.7 MB, links libc10_cuda.so) out of the real wheel."""
    d = tmp_path_factory.mktemp("kernel") / "sgl_kernel"
    d.mkdir()
    with zipfile.ZipFile(sgl_kernel_wheel) as zf:
        (d / "flashmla_ops.abi3.so").write_bytes(zf.read("sgl_kernel/flashmla_ops.abi3.so"))
    return d


def _torch_member(filename: str, member: str) -> Path:
    remote = remote_zip.pypi_file("torch", "2.9.1", filename)
    with remote_zip.RemoteWheel(remote) as wheel:
        return wheel.fetch_member(member)


def test_text_file_named_whl(tmp_path):
    bad = tmp_path / "fake-1.0-py3-none-any.whl"
    bad.write_text("this is not a zip\n")
    assert_clean_failure(cli("inspect", str(bad)), 2, "is not a readable zip archive", "hint:")


def test_zip_that_is_not_a_wheel(tmp_path):
    z = tmp_path / "plain.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("hello.txt", "hi")
    assert_clean_failure(cli("inspect", str(z)), 2, "is a zip archive but not a wheel")


@pytest.mark.network
def test_truncated_wheel(sgl_kernel_wheel, tmp_path):
    cut = tmp_path / sgl_kernel_wheel.name
    with open(sgl_kernel_wheel, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(5 << 20))  # the first 5 MB: no central directory
    assert_clean_failure(cli("inspect", str(cut)), 2, "is not a readable zip archive", "download it again")
    assert_clean_failure(cli("wheel", "diff", str(sgl_kernel_wheel), str(cut)), 2, "not a readable zip archive")


@pytest.mark.network
def test_corrupt_member(kernel_dir, tmp_path):
    """A wheel whose central directory is intact but whose ELF member bytes are damaged (CRC fails)."""
    whl = tmp_path / "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("sgl_kernel-0.3.21.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        zf.write(kernel_dir / "flashmla_ops.abi3.so", "sgl_kernel/flashmla_ops.abi3.so")
    data = bytearray(whl.read_bytes())
    start = data.index(b"\x7fELF")
    data[start + 100_000 : start + 100_016] = b"\xff" * 16
    whl.write_bytes(bytes(data))
    text = assert_clean_failure(cli("inspect", str(whl)), 1, "flashmla_ops.abi3.so")
    assert "Bad CRC-32" in text or "cannot be read" in text


def test_non_elf_shared_object(tmp_path):
    so = tmp_path / "libfake.so"
    so.write_text("INPUT ( /lib/libc.so.6 )\n")  # a linker script, as /usr/lib/.../libc.so is
    assert_clean_failure(cli("inspect", str(so)), 2, "is not an ELF file")
    assert_clean_failure(cli("doctor", "abi", "--kernel", str(so), "--torch", str(so)), 2, "is not an ELF file")


@pytest.mark.network
def test_torch_without_cuda_libraries(kernel_dir, tmp_path):
    """A torch/lib holding only the CPU libraries (as a CPU build does)."""
    lib = tmp_path / "torch" / "lib"
    lib.mkdir(parents=True)
    for name in ("libc10.so", "libtorch.so"):
        shutil.copy(_torch_member(TORCH_X86, f"torch/lib/{name}"), lib / name)
    text = assert_clean_failure(
        cli("doctor", "abi", "--kernel", str(kernel_dir), "--torch", str(tmp_path / "torch")), 1,
        "has no CUDA libraries", "CPU-only torch",
    )
    assert "fix:" in text


@pytest.mark.network
def test_elf_of_another_architecture(kernel_dir, tmp_path):
    """libc10.so of the aarch64 torch wheel, read on this x86_64 host."""
    lib = tmp_path / "torch" / "lib"
    lib.mkdir(parents=True)
    shutil.copy(_torch_member(TORCH_ARM, "torch/lib/libc10.so"), lib / "libc10.so")
    result = cli("inspect", str(lib / "libc10.so"))
    assert "Traceback" not in result.stderr
    assert "aarch64" in result.stdout and "cannot load on this x86_64 host" in result.stdout
    assert_clean_failure(
        cli("doctor", "abi", "--kernel", str(kernel_dir), "--torch", str(lib)), 1,
        "built for x86_64 but torch's libraries are aarch64",
    )


def test_missing_path():
    assert_clean_failure(cli("inspect", "/nonexistent/x.whl"), 2, "does not exist")


def _data_copy(tmp_path: Path) -> Path:
    """The project's data files, copied: a root for BLACKWELL_STACK_ROOT that a test may break."""
    from conftest import copy_data_root

    return copy_data_root(tmp_path / "root")


def _cli_with_root(root: Path, *args: str) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "BLACKWELL_STACK_ROOT": str(root)}
    return subprocess.run([sys.executable, "-m", "blackwell_stack", *args], capture_output=True, text=True,
                          timeout=600, env=env)


@pytest.mark.parametrize("memory", [{"per_nvcc_thread_peak_mib": "lots"}, [], {"headroom_mib": 1}])
def test_doctor_reports_recipe_data_that_plan_rejects(tmp_path, memory):
    import json

    root = _data_copy(tmp_path)
    recipe = root / "pkgs/sgl-kernel/recipe.json"
    data = json.loads(recipe.read_text())
    data["memory"] = memory
    recipe.write_text(json.dumps(data))
    rejected = assert_clean_failure(_cli_with_root(root, "plan", "kernel"), 3, "recipe.json")
    result = _cli_with_root(root, "doctor", "--json")
    assert "Traceback" not in result.stderr, result.stderr
    check = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "memory for a kernel build")
    assert check["status"] == "fail" and "memory" in check["message"]
    assert check["message"].split(": ", 1)[1].split(":")[0] in rejected  # the same finding as `plan kernel`


def test_doctor_reports_a_malformed_torch_pin(tmp_path):
    """The torch doctor expects is the default stack's locked torch: a lock that cannot be read is a failed check."""
    import json

    root = _data_copy(tmp_path)
    (root / "stacks/stable/uv.lock").write_text('version = 1\n[[package]\nname = "torch"\n')
    result = _cli_with_root(root, "doctor", "--json")
    assert "Traceback" not in result.stderr and result.returncode == 1, result.stderr
    check = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "torch pin")
    assert check["status"] == "fail" and "uv.lock" in check["message"], check


def test_inspect_reports_a_wheel_whose_record_disagrees(tmp_path):
    from support.index_server import build_wheel

    good = build_wheel(tmp_path, "demo", "1.0")
    assert cli("inspect", str(good)).returncode == 0
    bad = tmp_path / "tampered" / good.name
    bad.parent.mkdir()
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            out.writestr(info, b"print('changed')\n" if info.filename == "demo/__init__.py" else src.read(info))
        out.writestr("demo/extra.py", b"")
    text = assert_clean_failure(cli("inspect", str(bad)), 1, "RECORD", "DISAGREES", "demo/__init__.py: size")
    assert "demo/extra.py: in the wheel but not listed in RECORD" in text


def test_inspect_of_a_directory_without_elf_files_is_an_error(tmp_path):
    assert_clean_failure(cli("inspect", str(tmp_path)), 2, "holds no ELF file", "hint:")


def test_doctor_abi_takes_python_after_abi(tmp_path):
    for args in (["doctor", "abi", "--python", "/nonexistent/python"], ["doctor", "--python", "/nonexistent/python", "abi"]):
        assert_clean_failure(cli(*args), 2, "cannot run --python /nonexistent/python")
