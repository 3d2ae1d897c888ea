"""Rehearsals (b) and (c): the sgl-kernel derivation's build, and the torch import it makes (docs/nix-rehearsal.md).

(b) pkgs/sgl-kernel/default.nix is evaluated with the real nix (nixpkgs'
parts stand-ins: CUDA components laid out from NVIDIA's wheels, the offline
sources, the rehearsal's tools and Python packages). Its source is unpacked
and patched as stdenv does, and pyproject.nix's own configure and build hooks
(from the locked pyproject.nix) run its preBuild and `uv build` with exactly
its settings: the build inputs on CMAKE_PREFIX_PATH and in the compiler
wrapper's flags as nixpkgs' setup hooks put them there, its Python build
inputs on PYTHONPATH one site-packages each, FetchContent from the offline
sources. The build stops after CMake's generation (ninja -n); then one light
unit compiles for sm_120a.

(c) The build imports torch (CMakeLists.txt: the C++ ABI flag) with nothing
that provides libcuda.so.1, as in the sandbox.
"""

from __future__ import annotations

import re
import subprocess

import pytest
from support.rehearsal import diagnose
from support.rehearsal import session as rh

pytestmark = [pytest.mark.rehearsal, pytest.mark.nix, pytest.mark.network, pytest.mark.slow]

# A light unit of the library SM120 loads (sm100/common_ops): a few kernels, torch's headers.
LIGHT_UNIT = "CMakeFiles/common_ops_sm100_build.dir/csrc/memory/store.cu.o"


@pytest.fixture(scope="module")
def configured(rehearsal, tmp_path_factory):
    top = tmp_path_factory.mktemp("sgl-kernel-build")
    result, env = rh.sgl_kernel_build(rehearsal, top)
    log = result.stdout + result.stderr
    if result.returncode != 0:
        pytest.fail("the sgl-kernel build phase stopped before CMake's generation finished:\n"
                    + diagnose.explain(log, rehearsal.tree, "pkgs/sgl-kernel/default.nix") + "\n"
                    + "\n".join(line for line in log.splitlines() if "CMake Error" in line or "Could not find" in line)
                    + "\n" + log[-4000:])
    return top / "cmake-build", env, log


def cache(build_dir) -> dict[str, str]:
    entries = {}
    for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
        m = re.match(r"^([^/#][^:=]*):[A-Z_]+=(.*)$", line)
        if m:
            entries[m.group(1)] = m.group(2)
    return entries


def test_configure_finds_torch_and_generates_with_only_the_derivations_inputs(configured, rehearsal):
    build_dir, _env, log = configured
    assert "-- Found Torch:" in log and "-- Generating done" in log and "Build files have been written" in log
    entries = cache(build_dir)
    torch_site = rehearsal.torch_set.dirs["torch"]
    assert entries["Torch_DIR"] == f"{torch_site}/torch/share/cmake/Torch"
    assert entries["CMAKE_CUDA_COMPILER"].startswith(str(rehearsal.tree.output_dir("cuda_nvcc", "out")))
    # Every library CMake found is an input of the derivation (its store directories), none of this host's CUDA.
    store = str(rehearsal.tree.root)
    found = {k: v for k, v in entries.items() if k.startswith("CUDA_") and k.endswith("_LIBRARY") and "NOTFOUND" not in v}
    assert found and all(v.startswith(store) for v in found.values()), found
    assert "/usr/local/cuda" not in (build_dir / "build.ninja").read_text()


def test_torch_config_needs_neither_cufft_nor_nvtx(configured):
    """The review's finding 2, rehearsed: torch 2.12.1's CMake config defines caffe2::cufft but no target of
    torch's links it, and it names no NVTX; without cuFFT and NVTX among the inputs CMake generates a build
    that references neither (nothing NOTFOUND in build.ninja)."""
    build_dir, _env, _log = configured
    entries = cache(build_dir)
    assert entries["CUDA_cufft_LIBRARY"].endswith("NOTFOUND")
    assert entries["CUDA_nvtx3_interop_LIBRARY"].endswith("NOTFOUND")
    ninja = (build_dir / "build.ninja").read_text()
    assert "NOTFOUND" not in ninja and "cufft" not in ninja and "nvtx" not in ninja


def test_one_unit_compiles_for_sm120a(configured):
    build_dir, env, _log = configured
    built = subprocess.run(["ninja", LIGHT_UNIT], cwd=build_dir, env=env, capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout[-4000:]
    assert rh.device_code(build_dir / LIGHT_UNIT) == {("cubin", "sm_120a")}


IMPORT = """
import ctypes, sys
import torch
print("abi", int(torch._C._GLIBCXX_USE_CXX11_ABI))
loaded = {line.split()[-1].rsplit("/", 1)[-1] for line in open("/proc/self/maps") if ".so" in line}
print("libcuda", sorted(n for n in loaded if n.startswith("libcuda.so")))
print("libcaffe2_nvrtc", "libcaffe2_nvrtc.so" in loaded)
print("triton", "triton" in sys.modules)
try:
    ctypes.CDLL("libcuda.so.1")
    print("loadable", True)
except OSError:
    print("loadable", False)
"""


def test_torch_imports_as_the_build_imports_it_with_no_libcuda(rehearsal, tmp_path):
    """The review's finding 3, rehearsed: the build's `import torch` with no driver anywhere. torch's libraries
    load without libcuda.so.1 (only libcaffe2_nvrtc.so links it, and torch loads that one lazily)."""
    torch_set = rehearsal.torch_set
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": torch_set.pythonpath()}
    result = subprocess.run([rehearsal.python, "-c", IMPORT], env=env, cwd=tmp_path, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert seen == {"abi": "1", "libcuda": "[]", "libcaffe2_nvrtc": "False", "triton": "False", "loadable": "False"}
    assert "triton" in torch_set.skipped  # not placed: the import does not need it
