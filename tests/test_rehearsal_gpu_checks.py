"""Rehearsal: the flake's GPU checks (nix/gpu-checks.nix) as their builder runs them, on a host with no GPU.

nix/gpu-checks.nix is evaluated with the real nix; of nixpkgs only runCommand
(its arguments, recorded) and python312's sitePackages are stand-ins, the
stable environment is the rehearsal's torch set behind a bin/python, and the
CLI is this checkout's. Each check's script then runs in bash as Nix's
builder runs it: its environment variables, its inputs' bin/ on PATH, $out
and a HOME-less sandbox. Here there is no GPU, as in a sandbox that
nix-required-mounts has not opened: the check fails at its first step, saying
what to turn on, with no traceback and nothing in $out. What only the GPU
host's `nix build .#gpuChecks.sgl-kernel` shows: that the hook mounts the
driver and devices, that the source-built kernel imports and passes the
smoke subset there, and pytest from nixpkgs beside the environment.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import REPO, nix_rehearsal

pytestmark = [pytest.mark.rehearsal, pytest.mark.nix, pytest.mark.network, pytest.mark.slow]


def test_each_gpu_check_stops_cleanly_without_a_gpu_in_its_sandbox(rehearsal, tmp_path):
    torch_set = rehearsal.torch_set
    env = nix_rehearsal.stack_environment(tmp_path / "sglang-env-stable", rehearsal.python, torch_set.pythonpath())
    cli = tmp_path / "blackwell-stack"
    (cli / "bin").mkdir(parents=True)
    (cli / "bin" / "blackwell-stack").write_text(
        f'#!/bin/bash\nPYTHONPATH={REPO / "src"} exec {sys.executable} -m blackwell_stack "$@"\n')
    (cli / "bin" / "blackwell-stack").chmod(0o755)
    environment = {"CUDA_HOME": "/rehearsal/cuda-home", "TRITON_LIBCUDA_PATH": str(rehearsal.driver_link)}
    checks = nix_rehearsal.gpu_checks(tmp_path, env=env, cli=cli, sources=tmp_path / "sglang-source",
                                      python_packages={n: tmp_path / n for n in ("pytest", "pluggy", "iniconfig")},
                                      environment=environment)
    assert set(checks) == {"sgl-kernel", "acceptance"}
    for name, check in checks.items():
        assert check["requiredSystemFeatures"] == ["cuda"] and check["env"] == environment
        build = tmp_path / f"build-{name}"
        build.mkdir()
        out = tmp_path / f"out-{name}"
        path = ":".join(f"{p}/bin" for p in check["nativeBuildInputs"])
        result = subprocess.run(["bash", "-eu", "-c", check["buildCommand"]], cwd=build, capture_output=True,
                                text=True, timeout=600,
                                env={**check["env"], "PATH": f"{path}:/usr/bin:/bin", "out": str(out),
                                     "TMPDIR": str(build), "HOME": "/homeless-shelter"})
        assert result.returncode == 1, (result.stdout, result.stderr[-3000:])
        message = " ".join(result.stderr.split())
        assert "torch sees no CUDA GPU in the build sandbox" in message and "Traceback" not in message
        assert "services.sglang.gpuChecks.enable = true" in message
        assert not out.exists()
