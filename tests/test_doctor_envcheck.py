"""The Python-environment checks on a site directory laid out from real wheels.

sgl-kernel 0.3.21's sm100 common_ops library and its METADATA (from the PyPI
wheel), torch's dist-info, version.py and torch/lib libraries (range-read
from the PyPI torch wheel, hard-linked from the cache): the same files an
install puts there, checked without importing torch.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest

from blackwell_stack.doctor import envcheck
from blackwell_stack.doctor.checks import FAIL, OK, WARN
from blackwell_stack.formats import remote_zip

pytestmark = [pytest.mark.network, pytest.mark.slow]

KERNEL_MEMBERS = ("sgl_kernel-0.3.21.dist-info/METADATA", "sgl_kernel/sm100/common_ops.abi3.so")
TORCH_LIBS = ("libc10.so", "libc10_cuda.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so", "libtorch_python.so")


@pytest.fixture(scope="module")
def kernel_site(pypi_file, tmp_path_factory) -> Path:
    wheel = pypi_file("sgl-kernel", "0.3.21", "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl")
    site = tmp_path_factory.mktemp("kernel-site")
    with zipfile.ZipFile(wheel) as zf:
        for name in KERNEL_MEMBERS:
            dest = site / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(name) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out, 4 << 20)
    return site


def _place(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)  # the cache and the temp dir usually share a file system: no copy
    except OSError:
        shutil.copy(src, dest)


def torch_site(version: str, root: Path) -> Path:
    remote = remote_zip.pypi_file("torch", version, f"torch-{version}-cp312-cp312-manylinux_2_28_x86_64.whl")
    site = root / f"torch-{version}-site"
    with remote_zip.RemoteWheel(remote) as wheel:
        members = [f"torch-{version}.dist-info/METADATA", "torch/version.py"] + [f"torch/lib/{n}" for n in TORCH_LIBS]
        for member in members:
            _place(wheel.fetch_member(member), site / member)
    return site


def _checks(kernel_site, torch_dir, cc):
    env = envcheck.Environment(paths=[str(kernel_site), str(torch_dir)])
    return {c.name: c for c in envcheck.checks(env, gpu_cc=cc)}


def test_prebuilt_kernel_on_torch_2_9_1(kernel_site, tmp_path):
    checks = _checks(kernel_site, torch_site("2.9.1", tmp_path), "12.0")
    torch = checks["torch"]
    assert torch.status == FAIL and "CUDA 12.8" in torch.value and "CUDA 13" in torch.message
    abi = checks["sgl-kernel ABI"]
    assert abi.status == OK and abi.value == "0.3.21" and "resolve" in abi.message
    archs = checks["sgl-kernel architectures"]
    assert archs.status == OK and "sm_120a" in archs.value
    assert checks["flashinfer"].status == WARN and checks["sglang"].status == WARN


def test_prebuilt_kernel_on_torch_2_10_names_the_symbol(kernel_site, tmp_path):
    checks = _checks(kernel_site, torch_site("2.10.0", tmp_path), "12.0")
    abi = checks["sgl-kernel ABI"]
    assert abi.status == FAIL
    assert "c10_cuda_check_implementation" in abi.message or "MessageLogger" in abi.message
    assert "nix build .#sgl-kernel-wheel" in abi.fix


def test_no_code_for_another_gpu(kernel_site, tmp_path):
    """sm_100a/sm_120a cubins are arch-specific: a compute capability 10.3 GPU gets no code."""
    checks = _checks(kernel_site, torch_site("2.9.1", tmp_path), "10.3")
    archs = checks["sgl-kernel architectures"]
    assert archs.status == FAIL and "no code that runs" in archs.message and "sm_103a" in archs.fix
