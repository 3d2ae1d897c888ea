"""The current stack's kernel package, the real PyPI wheel sglang-kernel 0.4.10 (sglang
0.5.23 requires it): built for CUDA 13 with sm_120a code, and every torch symbol it needs
is in the torch the current stack locks (2.14.1, sglang 0.5.23's torch pin), so no source
build is needed for SM120. The kernel's and torch's files are the ones stacks/current/uv.lock
names, with its sha256.

The kernel wheel is downloaded whole (373 MB, 342 MB of it the FA3 library, whose symbols
count too) and cached; torch is read with range requests (only torch/lib's libraries).
"""

from __future__ import annotations

import pytest
from support import cuobjdump

from blackwell_stack.data import lock as lockfile
from blackwell_stack.data import stack as stack_data
from blackwell_stack.data import wheel_choice as wheels
from blackwell_stack.doctor import abi, inspection
from blackwell_stack.hashes import sha256_file
from blackwell_stack.stacks import libraries

pytestmark = [pytest.mark.network, pytest.mark.slow]

LOCK = stack_data.load("current").lock()
KERNEL = LOCK.get(stack_data.load("current").kernel["package"])
TORCH = LOCK.get("torch")
WHEEL = "sglang_kernel-0.4.10-cp310-abi3-manylinux2014_x86_64.whl"
SM120_LIBRARIES = (
    "sgl_kernel/sm100/common_ops.abi3.so",
    "sgl_kernel/sm90/common_ops.abi3.so",
    "sgl_kernel/spatial_ops.abi3.so",
    "sgl_kernel/infllm_ops.cpython-310-x86_64-linux-gnu.so",
)


def test_the_current_stack_locks_this_wheel_and_torch_2_14_1():
    assert (KERNEL.name, KERNEL.version, wheels.filename(wheels.uv_choice(KERNEL))) == ("sglang-kernel", "0.4.10", WHEEL)
    assert TORCH.version == "2.14.1"


@pytest.fixture(scope="module")
def wheel(pypi_file):
    path = pypi_file(KERNEL.name, KERNEL.version, wheels.filename(wheels.uv_choice(KERNEL)))
    assert sha256_file(path) == lockfile.sha256_of(wheels.uv_choice(KERNEL)), "not the file the lock names"
    return path


@pytest.fixture(scope="module")
def report(wheel):
    return inspection.inspect_path(str(wheel))


def _file(report, name):
    return next(f for f in report["files"] if f["name"] == name)


def test_the_wheel_is_cuda_13_with_sm_120a(report):
    assert report["distribution"] == {"name": "sglang-kernel", "version": "0.4.10"}
    assert report["cuda_runtime"] == [13]
    assert report["errors"] == []
    assert "sm_120a" in report["cubin"]
    for name in SM120_LIBRARIES:
        f = _file(report, name)
        assert "sm_120a" in f["cubin"], name
        assert f["cuda_runtime"] == 13 and "libcudart.so.13" in f["needed"], name


def test_fa3_has_no_sm120_code(report):
    # The evidence for rule sm120-attention-backend-without-kernels on sglang 0.5.23:
    # FlashAttention 3 (flash_ops) is sm_80/sm_86/sm_90a only, and carries no PTX to JIT.
    f = _file(report, "sgl_kernel/flash_ops.abi3.so")
    assert f["cubin"] == ["sm_80", "sm_86", "sm_90a"]
    assert f["ptx"] == []


def test_own_reader_agrees_with_cuobjdump(report, wheel, tmp_path):
    compared, differ = cuobjdump.disagreements(cuobjdump.required(), report, wheel, tmp_path)
    assert compared >= len(SM120_LIBRARIES) and differ == []


def test_every_torch_symbol_resolves_in_the_locked_torch(wheel):
    kernel = abi.load_kernel(str(wheel))
    # The torch file of the current lock (URL, sha256, size from uv.lock), read by range requests.
    remote = libraries.remote_file(wheels.uv_choice(TORCH))
    result = abi.compare(kernel, abi._load_remote_torch(remote, kernel))
    assert result["ok"], result["problems"]
    assert result["missing"] == []
    assert result["resolved"] == result["kernel"]["torch_symbols_needed"] == 122
    assert result["kernel"]["cuda_runtime"] == result["torch"]["cuda_runtime"] == 13
