"""Rehearsal: the loader finds each library through the RUNPATH the Nix build writes (docs/nix-rehearsal.md).

The stable stack's torch and what it loads are placed one site-packages per package, as pyproject.nix installs
them, and autoPatchelf's RUNPATHs are written into them with patchelf from nix/fixups/wheel-libraries.nix as nix
evaluates it (rehearsal/autopatchelf.py). Nothing sets LD_LIBRARY_PATH: each file finds what it needs, and
reaches the driver it may dlopen, through its own RUNPATH, as glibc's loader searches it.
"""

from __future__ import annotations

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
