"""inspect and doctor abi on the real sgl-kernel 0.3.21 wheel and real torch wheels from PyPI.

torch is read with HTTP range requests (only torch/lib's libraries, cached
under the user cache by the wheel's sha256); sgl-kernel is downloaded whole
(535 MB, cached) by the pypi_file fixture.
"""

from __future__ import annotations

import pytest
from support import cuobjdump

from blackwell_stack.doctor import abi, inspection
from blackwell_stack.formats import remote_zip

pytestmark = [pytest.mark.network, pytest.mark.slow]

TORCH_WHEEL = "torch-{v}-cp312-cp312-manylinux_2_28_x86_64.whl"
C10_CHECK = "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)"


@pytest.fixture(scope="module")
def sgl_kernel_wheel(pypi_file):
    return pypi_file("sgl-kernel", "0.3.21", "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl")


@pytest.fixture(scope="module")
def report(sgl_kernel_wheel):
    """One `inspect` of the whole wheel."""
    return inspection.inspect_path(str(sgl_kernel_wheel))


@pytest.fixture(scope="module")
def kernel(sgl_kernel_wheel):
    return abi.load_kernel(str(sgl_kernel_wheel))


def _file(report, name):
    return next(f for f in report["files"] if f["name"] == name)


def test_sm100_common_ops_has_sm120a_and_cuda_12(report):
    f = _file(report, "sgl_kernel/sm100/common_ops.abi3.so")
    assert "sm_120a" in f["cubin"]
    assert f["cubin"] == ["sm_80", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120a"]  # docs/reference-deployment.md#kernel-abi
    assert f["cuda_runtime"] == 12
    assert "libcudart.so.12" in f["needed"]
    assert "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib" in f["torch_symbols"]
    assert f["compression"] == ["lz4"]  # built with CUDA 12: LZ4-compressed cubins, read from headers only


def test_wheel_summary(report):
    assert report["distribution"] == {"name": "sgl-kernel", "version": "0.3.21"}
    assert report["cuda_runtime"] == [12]
    assert report["errors"] == []
    assert {"libc10_cuda.so", "libtorch_cuda.so"} <= set(report["torch_libraries"])


def test_own_reader_agrees_with_cuobjdump_on_the_wheel(report, sgl_kernel_wheel, tmp_path):
    compared, differ = cuobjdump.disagreements(cuobjdump.required(), report, sgl_kernel_wheel, tmp_path)
    assert compared >= 1 and differ == []


def _torch(version, kernel):
    remote = remote_zip.pypi_file("torch", version, TORCH_WHEEL.format(v=version))
    return abi._load_remote_torch(remote, kernel)


def test_abi_resolves_against_torch_2_9_1(kernel):
    result = abi.compare(kernel, _torch("2.9.1", kernel))
    assert result["ok"], result["problems"]
    assert result["missing"] == []
    assert result["resolved"] == result["kernel"]["torch_symbols_needed"] > 100
    assert result["torch"]["cuda_runtime"] == 12


def test_abi_reports_the_changed_signature_in_torch_2_10(kernel):
    result = abi.compare(kernel, _torch("2.10.0", kernel))
    assert not result["ok"]
    missing = {m["demangled"]: m for m in result["missing"]}
    assert C10_CHECK in missing
    m = missing[C10_CHECK]
    assert "sgl_kernel/sm100/common_ops.abi3.so" in m["needed_by"]
    (has,) = m["torch_has"]
    assert has["demangled"] == C10_CHECK.replace(", int, bool)", ", unsigned int, bool)")
    assert has["library"] == "libc10_cuda.so"
    assert has["difference"] == "parameter 4: int -> unsigned int"
    (problem,) = [p for p in result["problems"] if p["check"] == "torch symbols"]
    assert "built against another torch" in problem["message"]
    assert "nix build .#sgl-kernel-wheel" in problem["fix"] and "blackwell-stack kernel build" in problem["fix"]


def test_remote_members_are_cached_by_wheel_sha256(kernel):
    remote = remote_zip.pypi_file("torch", "2.10.0", TORCH_WHEEL.format(v="2.10.0"))
    with remote_zip.RemoteWheel(remote) as wheel:
        path = wheel.fetch_member("torch/lib/libc10_cuda.so")
        assert remote.sha256 in str(path)
        written = path.stat().st_mtime_ns
        # A cached member is not fetched (written) again.
        assert wheel.fetch_member("torch/lib/libc10_cuda.so") == path and path.stat().st_mtime_ns == written


def test_name_prefix_finds_same_function_other_signature():
    assert abi.name_prefix("_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib") == abi.name_prefix(
        "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_jb"
    )
    assert abi.name_prefix("_ZN3c1013MessageLoggerC1EPKcii") == "_ZN3c1013MessageLoggerC1E"


def test_signature_difference_splits_parameters_at_the_top_level():
    wanted, present = "f<a, b>(std::pair<int, int>, int) const", "f<a, b>(std::pair<int, int>, unsigned int) const"
    assert abi.signature_difference(wanted, present) == "parameter 2: int -> unsigned int"
    assert abi.signature_difference("f()", "f(int)") == "0 parameters wanted, torch's has 1"
