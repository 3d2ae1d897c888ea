"""Rehearsal (d): what `nix develop` sets that the build and the service do not (docs/nix-rehearsal.md).

nix/dev-shell.nix is evaluated with the real nix over the stable stack's
nix/stack-env.nix (the environment's passthru: CUDA_HOME, CC, CXX,
TRITON_LIBCUDA_PATH), nixpkgs' parts stand-ins as in the other rehearsals: the
CUDA_HOME of nix/cuda-home.nix (rehearsal (a)), nixpkgs' CMake release, the
host compiler for backendStdenv.cc, and for the environment's python the
stable stack's torch set. Its shellHook then runs in bash with the shell's
packages on PATH, from a checkout, as `nix develop` runs it: the variables
reach the shell, nvcc on PATH is the CUDA_HOME's, the banner's version parse
and torch check work with no GPU, and `blackwell-stack` runs this checkout.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import REPO, nix_rehearsal

pytestmark = [pytest.mark.rehearsal, pytest.mark.nix, pytest.mark.network, pytest.mark.slow]

SHOW = 'for v in CUDA_HOME CC CXX TRITON_LIBCUDA_PATH; do echo "$v=${!v}"; done; command -v nvcc cmake ninja python'


def test_dev_shell_hook_runs_with_the_environment(rehearsal, tmp_path):
    home, _args = rehearsal.cuda_home()
    tools = rehearsal.build_tools()
    torch_set = rehearsal.torch_set
    # The environment's bin/python: the stack's Python with the stable torch set (what the banner imports).
    env_dir = nix_rehearsal.stack_environment(tmp_path / "sglang-dev-env-stable", rehearsal.python,
                                              torch_set.pythonpath())
    cli = tmp_path / "blackwell-stack-cli"
    shell = nix_rehearsal.dev_shell(rehearsal.tree, tmp_path, cuda_home=home, env=env_dir, cli=cli,
                                    cc=rehearsal.backend_cc.parent, cmake=tools["cmake"].parent,
                                    cmake_version=tools["cmake_version"], ninja=tools["ninja"])
    assert shell["environment"] == {"CUDA_HOME": str(home), "CC": str(rehearsal.backend_cc / "cc"),
                                    "CXX": str(rehearsal.backend_cc / "c++"),
                                    "TRITON_LIBCUDA_PATH": "/run/opengl-driver/lib"}
    (cli / "bin").mkdir(parents=True)
    (cli / "bin" / "blackwell-stack").write_text("#!/bin/bash\n" + shell["cli"])
    (cli / "bin" / "blackwell-stack").chmod(0o755)
    path = ":".join(f"{p}/bin" for p in shell["packages"])
    script = shell["shellHook"] + "\n" + SHOW + "\nblackwell-stack --help >/dev/null && echo cli=ok\n"
    result = subprocess.run(["bash", "-eu", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600,
                            env={"PATH": f"{path}:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert (f"blackwell-stack dev shell: stack stable (sglang 0.5.9, flashinfer 0.6.5, torch 2.12.1), "
            f"nvcc 13.0, cmake {tools['cmake_version']}") in out
    assert "torch 2.12.1+cu130 (built for CUDA 13.0)" in out and "CUDA available: False" in out
    for name, value in shell["environment"].items():
        assert f"{name}={value}" in out.splitlines()
    assert f"{home}/bin/nvcc" in out.splitlines() and "cli=ok" in out
    # No driver on this machine: the hook says where it looked, and the shell goes on.
    assert ("blackwell_stack_host_driver /run/opengl-driver/lib "
            '"${XDG_CACHE_HOME:-$HOME/.cache}/blackwell-stack/host-driver" '
            "/usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/wsl/lib") in " ".join(shell["shellHook"].replace("\\\n", " ").split())
    assert "NVIDIA driver: none found (/run/opengl-driver/lib," in result.stderr


# --- the driver on a host that is not NixOS (nix/host-driver.sh, which the shell hook runs) ---------

# What a process in the shell finds when it loads the driver by name, as libcudart and NCCL do.
LOAD_BY_NAME = """
import ctypes, json, pathlib
cuda = ctypes.CDLL("libcuda.so.1")
version = ctypes.c_int(0)
assert cuda.cuDriverGetVersion(ctypes.byref(version)) == 0
maps = pathlib.Path("/proc/self/maps").read_text().split()
print(json.dumps({"version": version.value, "mapped": sorted({w for w in maps if "libcuda.so" in w})}))
"""


def _host_shell(rehearsal, tmp_path, link: Path, host_dirs: list[Path]) -> subprocess.CompletedProcess:
    script = (f"source {REPO / 'nix' / 'host-driver.sh'}\n"
              f"blackwell_stack_host_driver {link} {tmp_path / 'own'} {' '.join(map(str, host_dirs))}\n"
              'echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"\necho "TRITON_LIBCUDA_PATH=${TRITON_LIBCUDA_PATH:-}"\n'
              f"{rehearsal.python} -c '{LOAD_BY_NAME}' || true\n")
    return subprocess.run(["bash", "-eu", "-c", script], capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TRITON_LIBCUDA_PATH": str(link)})


def _driver_copy(rehearsal, where: Path) -> Path:
    """NVIDIA's driver libraries (Debian's packages) in a directory of the host's kind, beside the host's other
    libraries (a libstdc++ that must not be exposed)."""
    where.mkdir(parents=True)
    for lib in (rehearsal.nvidia_driver / "lib").iterdir():
        (where / lib.name).symlink_to(lib.resolve())
    (where / "libstdc++.so.6").symlink_to("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    return where


def test_on_nixos_the_driver_link_is_used_as_it_is(rehearsal, tmp_path):
    _ = rehearsal.python
    link = rehearsal.nvidia_driver / "lib"
    result = _host_shell(rehearsal, tmp_path, link, [_driver_copy(rehearsal, tmp_path / "usr-lib")])
    assert result.returncode == 0, result.stderr
    assert "LD_LIBRARY_PATH=\n" in result.stdout + "\n" and f"TRITON_LIBCUDA_PATH={link}" in result.stdout
    assert "NVIDIA driver" not in result.stdout + result.stderr


def test_on_another_host_only_the_hosts_driver_libraries_are_exposed(rehearsal, tmp_path):
    """The driver link is empty (not NixOS); the driver is in the host's usual directory, beside other libraries.
    The shell exposes its libcuda and libnvidia-* only, a process loads libcuda by name from there, and the
    command it prints makes the driver link that loads by path need."""
    _ = rehearsal.python
    host = _driver_copy(rehearsal, tmp_path / "usr" / "lib" / "x86_64-linux-gnu")
    link = tmp_path / "run" / "opengl-driver" / "lib"
    result = _host_shell(rehearsal, tmp_path, link, [tmp_path / "usr" / "lib64", host])
    assert result.returncode == 0, result.stderr
    own = tmp_path / "own"
    assert f"LD_LIBRARY_PATH={own}" in result.stdout.splitlines() and f"TRITON_LIBCUDA_PATH={own}" in result.stdout
    exposed = sorted(p.name for p in own.iterdir())
    assert "libcuda.so.1" in exposed and "libnvidia-ml.so.1" in exposed and "libstdc++.so.6" not in exposed
    assert all(name.startswith(("libcuda.so", "libnvidia-")) for name in exposed), exposed
    loaded = json.loads(result.stdout.splitlines()[-1])
    # From the host's directory (its links resolve to the Debian driver's files), the driver link being empty.
    driver_files = str((rehearsal.nvidia_driver / "lib").resolve()) + "/"
    assert loaded["version"] == 12020 and loaded["mapped"]
    assert all(m.startswith(driver_files) for m in loaded["mapped"]), loaded
    (command,) = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("sudo ")]
    assert command == f"sudo mkdir -p {link} && sudo ln -sf {host}/libcuda.so* {host}/libnvidia-*.so* {link}/"
    subprocess.run(["bash", "-c", command.replace("sudo ", "")], check=True, timeout=60)
    after = _host_shell(rehearsal, tmp_path, link, [host])
    assert "LD_LIBRARY_PATH=\n" in after.stdout + "\n" and "NVIDIA driver" not in after.stdout + after.stderr


def test_with_no_driver_anywhere_the_shell_says_where_it_looked(rehearsal, tmp_path):
    _ = rehearsal.python
    link = tmp_path / "run" / "opengl-driver" / "lib"
    result = _host_shell(rehearsal, tmp_path, link, [tmp_path / "usr-lib"])
    assert result.returncode == 0
    assert f"NVIDIA driver: none found ({link}, the host's ldconfig cache and {tmp_path / 'usr-lib'}" in result.stderr
