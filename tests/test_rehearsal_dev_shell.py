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

import subprocess

import pytest
from support import nix_rehearsal
from support.rehearsal import session as rh

pytestmark = [pytest.mark.rehearsal, pytest.mark.nix, pytest.mark.network, pytest.mark.slow]

SHOW = 'for v in CUDA_HOME CC CXX TRITON_LIBCUDA_PATH; do echo "$v=${!v}"; done; command -v nvcc cmake ninja python'


def test_dev_shell_hook_runs_with_the_environment(rehearsal, tmp_path):
    home, _args = rehearsal.cuda_home()
    tools = rehearsal.build_tools()
    torch_set = rehearsal.torch_set
    # The environment's bin/python: the stack's Python with the stable torch set (what the banner imports).
    env_dir = tmp_path / "sglang-dev-env-stable"
    (env_dir / "bin").mkdir(parents=True)
    (env_dir / "bin" / "python").write_text(
        "#!/bin/bash\n"
        f'export PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{torch_set.pythonpath()}"\n'
        f'exec {rehearsal.python} "$@"\n')
    (env_dir / "bin" / "python").chmod(0o755)
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
    result = subprocess.run(["bash", "-eu", "-c", script], cwd=rh.REPO, capture_output=True, text=True, timeout=600,
                            env={"PATH": f"{path}:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert (f"blackwell-stack dev shell: stack stable (sglang 0.5.9, flashinfer 0.6.5, torch 2.12.1), "
            f"nvcc 13.0, cmake {tools['cmake_version']}") in out
    assert "torch 2.12.1+cu130 (built for CUDA 13.0)" in out and "CUDA available: False" in out
    for name, value in shell["environment"].items():
        assert f"{name}={value}" in out.splitlines()
    assert f"{home}/bin/nvcc" in out.splitlines() and "cli=ok" in out
