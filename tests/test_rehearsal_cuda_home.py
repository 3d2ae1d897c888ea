"""Rehearsal (a): CUDA_HOME as the service sees it, by flashinfer's JIT (docs/nix-rehearsal.md).

nix/cuda-home.nix is evaluated with the real nix and joined as symlinkJoin
joins it, from CUDA 13.0.2 components laid out as nixpkgs lays them out
(NVIDIA's wheels of the same versions). flashinfer's own JIT code, from the
stable (0.6.5) and current (0.7.2) stacks' wheels, writes the ninja file of its
norm module with that CUDA_HOME, CC as the environment sets it and sm_120a;
ninja then compiles every object of it with the tree's nvcc, with no GPU.
Linking is not rehearsed (the wheels carry no driver stub to link -lcuda with).

A failure names the header or library that was missing and the CUDA
component that has it: the one nix/cuda-home.nix lacks.

Every compile uses the lock's glibc headers (rehearsal/glibc.py): with them,
nixpkgs' cuda_crt of the lock fails any unit that includes <cmath> through a
-I include path, and the tree nix/cuda-packages.nix patches compiles it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support import REPO, nix_rehearsal
from support.rehearsal import diagnose, stdenv
from support.rehearsal import session as rh

pytestmark = [pytest.mark.rehearsal, pytest.mark.nix, pytest.mark.network, pytest.mark.slow]

# stack -> the packages flashinfer's JIT code imports, besides torch (from the stable stack's set)
FLASHINFER = {
    "stable": ("0.6.5", ["flashinfer-python", "apache-tvm-ffi", "filelock", "packaging", "typing-extensions"]),
    "current": ("0.7.2", ["flashinfer-python", "apache-tvm-ffi", "filelock", "packaging", "typing-extensions"]),
}


def test_cuda_home_is_what_cuda_home_nix_joins(rehearsal):
    home, args = rehearsal.cuda_home()
    assert args["name"] == "cuda-home-13.0" and args["passthru"] == {"cudaMajorMinorVersion": "13.0"}
    # postBuild ran: lib64 -> lib, where flashinfer links from.
    assert os.readlink(home / "lib64") == "lib"
    for path in ("bin/nvcc", "include/cuda_runtime.h", "include/crt/host_config.h", "include/cuda/atomic",
                 "include/cublasLt.h", "include/curand_kernel.h", "include/nvrtc.h", "include/nvtx3/nvToolsExt.h",
                 "lib/libcudart.so", "lib/libcublas.so", "lib/libnvrtc.so"):
        assert (home / path).exists(), path
    # No static archive of the math libraries: headers and shared libraries only.
    assert not list(home.glob("lib/libcublas*_static.a"))


def jit_env(rehearsal, home, jit_set, tmp_path, **extra: str) -> dict[str, str]:
    """The environment nix/stack-env.nix gives the service (CUDA_HOME, CC and CXX: the backend compiler), its
    bin/ (the ninja the JIT compilers run) before the host's, and PYTHONPATH over the set and torch."""
    return {
        "PATH": f"{rehearsal.ninja}/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "CUDA_HOME": str(home),
        "CC": str(rehearsal.backend_cc / "cc"),
        "CXX": str(rehearsal.backend_cc / "c++"),
        "PYTHONPATH": f"{jit_set.pythonpath()}:{rehearsal.torch_set.pythonpath()}",
        **extra,
    }


@pytest.mark.parametrize("stack", sorted(FLASHINFER))
def test_flashinfer_jit_module_compiles_for_sm120a_with_cuda_home(rehearsal, stack, tmp_path):
    home, _args = rehearsal.cuda_home()
    version, packages = FLASHINFER[stack]
    jit_set = rehearsal.python_set(stack, f"flashinfer-{stack}")
    for name in packages:
        jit_set.add_locked(name)
    rehearsal.write_runpaths(jit_set)
    site = jit_set.dirs["flashinfer-python"]
    assert site.joinpath(f"flashinfer_python-{version}.dist-info").is_dir()
    env = jit_env(rehearsal, home, jit_set, tmp_path, FLASHINFER_CUDA_ARCH_LIST="12.0a",
                  FLASHINFER_WORKSPACE_BASE=str(tmp_path))
    made = rh.run([rehearsal.python, str(REPO / "tests" / "support" / "flashinfer_jit_ninja.py"), str(site)], env=env,
                  cwd=tmp_path, timeout=600)
    assert made.returncode == 0, made.stderr[-3000:]
    ninja_file = json.loads(made.stdout.strip().splitlines()[-1])["ninja"]
    text = open(ninja_file).read()
    assert f"cuda_home = {home}" in text and "-gencode=arch=compute_120a,code=sm_120a" in text
    assert "-isystem $cuda_home/include" in text
    objects = rh.run(["ninja", "-f", ninja_file, "-t", "targets", "rule", "cuda_compile"], env=env, cwd=tmp_path,
                     timeout=60).stdout.split()
    assert len(objects) == 2, objects  # norm.cu and its binding
    # Both at once, one per core; -k 0 lets the other finish when one fails, so that each missing header is named.
    built = rh.run(["ninja", "-f", ninja_file, "-j", "2", "-k", "0", *objects], env=env, cwd=tmp_path, timeout=900)
    assert built.returncode == 0, (diagnose.explain(built.stdout + built.stderr, rehearsal.tree, "nix/cuda-home.nix")
                                   + "\n" + built.stdout[-3000:])
    for obj in objects:
        assert rh.device_code(obj) == {("cubin", "sm_120a")}, obj



def test_sglang_jit_kernel_builds_and_loads_with_cuda_home(rehearsal, tmp_path):
    """SGLang's own JIT kernels go through tvm-ffi's load_inline, which gives nvcc no CUDA include directory:
    $CUDA_HOME/bin/nvcc must find the runtime's headers by itself, as in NVIDIA's installers."""
    home, _args = rehearsal.cuda_home()
    jit_set = rehearsal.python_set("stable", "sglang-jit")
    for name in ("sglang", "apache-tvm-ffi", "typing-extensions"):
        jit_set.add_locked(name)
    rehearsal.write_runpaths(jit_set)
    cache = tmp_path / "tvm-ffi"
    env = jit_env(rehearsal, home, jit_set, tmp_path, TVM_FFI_CACHE_DIR=str(cache))
    made = rh.run([rehearsal.python, str(REPO / "tests" / "support" / "sglang_jit_kernel.py"), str(jit_set.dirs["sglang"])],
                  env=env, cwd=tmp_path, timeout=900)
    assert made.returncode == 0, (diagnose.explain(made.stdout + made.stderr, rehearsal.tree, "nix/cuda-home.nix")
                                  + "\n" + made.stderr[-3000:])
    assert json.loads(made.stdout.strip().splitlines()[-1]) == {"store_cache": True}
    built = [p for p in cache.rglob("*.so") if p.is_file()]
    assert len(built) == 1, built
    assert rh.device_code(built[0]) == {("cubin", "sm_120")}

# A translation unit like any CUDA extension's: <cmath>, and a math function in device code.
MATH_UNIT = "#include <cmath>\n__global__ void scale(float* x) { x[0] = rsqrtf(x[0]) * std::sqrt(x[1]); }\n"


def nvcc_compile(home, flag: str, tmp_path):
    """$CUDA_HOME/bin/nvcc on MATH_UNIT with $CUDA_HOME/include given as `flag` (-I as setuptools' CUDAExtension
    and DeepGEMM's NVRTC pass it; -isystem as flashinfer's and torch's JIT do), for sm_120a, no GPU."""
    source = tmp_path / "unit.cu"
    source.write_text(MATH_UNIT)
    return rh.run([str(home / "bin" / "nvcc"), flag, str(home / "include"), "-gencode=arch=compute_120a,code=sm_120a", "-c", str(source),
                   "-o", str(tmp_path / "unit.o")], env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
                  cwd=tmp_path, timeout=600)


@pytest.mark.parametrize("flag", ["-I", "-isystem"])
def test_cuda_home_compiles_cmath_against_the_lock_glibc(rehearsal, flag, tmp_path):
    # The lock's glibc declares rsqrt noexcept; nix/cuda-packages.nix makes cuda_crt's declaration agree.
    home, _args = rehearsal.cuda_home()
    assert rehearsal.tree.patches.get("cuda_crt"), "nix/cuda-packages.nix patches no cuda_crt"
    built = nvcc_compile(home, flag, tmp_path)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    assert rh.device_code(tmp_path / "unit.o") == {("cubin", "sm_120a")}


def test_unpatched_cuda_crt_fails_on_a_user_include_path_with_the_lock_glibc(rehearsal, tmp_path):
    """Why the patch: nixpkgs' cuda_crt of the lock, joined as nix/cuda-home.nix joins it, and the lock's glibc.
    Through -isystem the same headers compile (EDG lets a system header redeclare it), which is why flashinfer's
    JIT alone would not have shown it."""
    tree = rehearsal.unpatched_tree(tmp_path / "store")
    args = nix_rehearsal.cuda_home(tree, tmp_path)
    home = stdenv.symlink_join(tmp_path / "store" / args["name"],
                               [i.path for i in nix_rehearsal.as_inputs(args["paths"], tree)], args["postBuild"])
    failed = nvcc_compile(home, "-I", tmp_path)
    assert failed.returncode != 0
    assert 'exception specification is incompatible with that of previous function "rsqrt"' in failed.stdout + failed.stderr
    assert nvcc_compile(home, "-isystem", tmp_path).returncode == 0


# What SGLang's JIT kernels and a bare `nvcc x.cu` compile: the runtime's header, no include directory given.
RUNTIME_UNIT = "#include <cuda_runtime.h>\n__global__ void touch(int* x) { x[0] = 1; }\n"


def _compile_resolved(home: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """$CUDA_HOME/bin/nvcc reached through its resolved path, as flashinfer 0.7.2's jit/cake_gdn.py
    (Path.resolve) and torch Inductor's CUTLASS compile_utils.py (os.path.realpath) reach it."""
    source = tmp_path / "runtime.cu"
    source.write_text(RUNTIME_UNIT)
    nvcc = os.path.realpath(home / "bin" / "nvcc")
    return rh.run([nvcc, "-gencode=arch=compute_120a,code=sm_120a", "-c", str(source), "-o", str(tmp_path / "runtime.o")],
                  env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, cwd=tmp_path, timeout=600)


def test_nvcc_reached_through_its_resolved_path_still_finds_the_runtime_headers(rehearsal, tmp_path):
    """The tree's bin/nvcc is its own file, so resolving it leads back to this tree and its profile. As a link to
    cuda_nvcc's (before the fix), the resolved nvcc reads cuda_nvcc's profile, which names no runtime headers."""
    home, args = rehearsal.cuda_home()
    assert os.path.realpath(home / "bin" / "nvcc") == str(home / "bin" / "nvcc")
    built = _compile_resolved(home, tmp_path)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    before = "\n".join(line for line in args["postBuild"].splitlines() if "cp --remove-destination" not in line)
    assert before != args["postBuild"]
    old = stdenv.symlink_join(tmp_path / "store" / args["name"],
                              [i.path for i in nix_rehearsal.as_inputs(args["paths"], rehearsal.tree)], before)
    failed = _compile_resolved(old, tmp_path)
    assert failed.returncode != 0 and "cuda_runtime.h" in failed.stdout + failed.stderr
