"""Evaluating modules/sglang.nix with the real nixpkgs lib (tests/nixos/eval.nix).

A host configuration is a NixOS module written as Nix text; `evaluate` runs
them all in one nix-instantiate call and returns, per host, what eval.nix
reports: failed assertions, warnings, the sglang unit (only when no assertion
fails, as NixOS builds it), kernel modules, firewall ports, users, tmpfiles,
any nixpkgs.* definition, and the module's read-only final* options.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support import REPO, nix_inputs
from support.cli import run as cli_run

PROFILE = json.loads((REPO / "modules" / "profiles" / "qwen3.5-397b-a17b-nvfp4-sm120.json").read_text())

# Stand-in store paths: the module only interpolates them.
ENV_PATH = "/nix/store/0000000000000000000000000000000a-sglang-env"
CUDA_PATH = "/nix/store/0000000000000000000000000000000b-cuda-13.0"
CC_PATH = "/nix/store/0000000000000000000000000000000c-gcc-wrapper"
CLI_PATH = "/nix/store/0000000000000000000000000000000e-blackwell-stack"
CLI_PACKAGE = f'standIn.package "blackwell-stack" "{CLI_PATH}" {{ }}'
# The driver's bin output (nvidia-smi), as tests/nixos/options.nix's stand-in hardware.nvidia.package has it.
NVIDIA_BIN_PATH = "/nix/store/00000000000000000000000000000002-nvidia-x11-580.95.05-bin"
# The flake's package of each stack's environment, as tests/nixos/eval.nix places it with flake=True.
FLAKE_ENV_PREFIX = "/nix/store/0000000000000000000000000000000f-"
FLAKE = (f'{{ envPath = name: "{FLAKE_ENV_PREFIX}" + (import ./lib/stacks.nix).envName name; '
         f'cudaHome = "{CUDA_PATH}"; cc = "{CC_PATH}"; cli = "{CLI_PATH}"; }}')


def stack_package(env_path: str = ENV_PATH, versions: dict | None = None, with_passthru: bool = True) -> str:
    """A stack env as the flake's sglang-env is: passthru.blackwellStack, versions from the profile."""
    if not with_passthru:
        return f'standIn.package "python3-env" "{env_path}" {{ }}'
    versions = versions or {"sglang": PROFILE["runtime"]["sglang"], "flashinfer": PROFILE["runtime"]["flashinfer"], "torch": "2.12.1"}
    nix_versions = " ".join(f'{k} = "{v}";' for k, v in versions.items())
    return (
        f'standIn.package "sglang-env" "{env_path}" {{ passthru.blackwellStack = {{ stack = "stable"; '
        f'versions = {{ {nix_versions} }}; cudaHome = standIn.package "cuda-13.0" "{CUDA_PATH}" {{ }}; '
        f'cc = standIn.package "gcc-wrapper" "{CC_PATH}" {{ }}; }}; }}'
    )


def host(*settings: str, package: str | None = None, nvidia: bool = True, flake: bool = False) -> str:
    """A host module: services.sglang enabled with a stack env, the NVIDIA data-center
    driver with open modules (as the SM120 host has), then `settings` (Nix attribute
    bindings, each its own module so that they merge as in a real configuration).
    With flake=True the package is left to the flake's module (evaluate(..., flake=True))."""
    imports = " ".join(f"{{ {s} }}" for s in settings)
    driver = ("hardware.nvidia.datacenter.enable = lib.mkDefault true; hardware.nvidia.open = lib.mkDefault true; "
              "hardware.graphics.enable = lib.mkDefault true;") if nvidia else ""
    chosen = "" if flake else (f"services.sglang.package = lib.mkDefault ({package or stack_package()}); "
                               f"services.sglang.checkPackage = lib.mkDefault ({CLI_PACKAGE});")
    return f"""{{ standIn, lib, ... }}:
{{
  imports = [ {imports} ];
  services.sglang.enable = true;
  {chosen}
  {driver}
}}
"""


@pytest.fixture(scope="session")
def nixpkgs_lib(tmp_path_factory) -> Path:
    """nixpkgs.lib's lib/ at the revision flake.lock locks as nixpkgs-lib (narHash checked)."""
    return nix_inputs.source("nixpkgs-lib") / "lib"


def evaluate(nix, lib_dir: Path, hosts: dict[str, str], tmp_path: Path, *, flake: bool = False) -> dict[str, dict]:
    """Each host's evaluation. --read-write-mode: the launcher and the readiness gate
    (builtins.path) are added to the Nix store, so the unit's commands can be run.
    flake=True evaluates the flake's nixosModules.sglang (modules/flake-module.nix)
    with stand-ins of the flake's packages instead of modules/sglang.nix alone."""
    paths = {}
    for name, text in hosts.items():
        path = tmp_path / f"host-{name}.nix"
        path.write_text(text)
        paths[name] = path
    attrs = " ".join(f'"{name}" = {path};' for name, path in paths.items())
    expr = (
        f"builtins.mapAttrs (_: config: import ./tests/nixos/eval.nix {{ libPath = {lib_dir}; inherit config; "
        f"flake = {FLAKE if flake else 'null'}; }}) "
        f"{{ {attrs} }}"
    )
    result = subprocess.run([nix.binary, "--eval", "--strict", "--json", "--read-write-mode", "--expr", expr],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise AssertionError(f"evaluation failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout)


def evaluate_one(nix, lib_dir: Path, text: str, tmp_path: Path, *, flake: bool = False) -> dict:
    return evaluate(nix, lib_dir, {"host": text}, tmp_path, flake=flake)["host"]


def exec_argv(line: str, credentials: str | None = None) -> list[str]:
    """An Exec*= line split into argv the way systemd reads what the module writes:
    JSON-quoted words (utils.escapeSystemdExecArgs) with %% and $$ for % and $, and
    bare words (the smoke test's `--api-key-file %d/api-key`); %d is the credentials
    directory (systemd.unit(5))."""
    decoder = json.JSONDecoder()
    argv, i = [], 0
    while i < len(line):
        if line[i] == " ":
            i += 1
            continue
        if line[i] == '"':
            word, i = decoder.raw_decode(line, i)
        else:
            end = line.find(" ", i)
            end = len(line) if end < 0 else end
            word, i = line[i:end], end
            if credentials is not None:
                word = word.replace("%d", credentials)
        argv.append(word.replace("%%", "%").replace("$$", "$"))
    return argv


def run_check(result: dict, tmp_path: Path):
    """The configuration's build-time check (modules/sglang/check.nix) as its derivation runs it: the files
    passAsFile writes, then its script's command, with this checkout's CLI."""
    checked = result["checked"]
    assert checked is not None, result["failedAssertions"]
    attrs = checked["drvAttrs"]
    assert attrs["passAsFile"] == ["profile", "moduleConfig"]
    env = {}
    for name in attrs["passAsFile"]:
        path = tmp_path / f"{name}.json"
        path.write_text(attrs[name])
        env[f"{name}Path"] = str(path)
    (line,) = [w for w in checked["buildCommand"].splitlines() if w.strip().startswith("blackwell-stack ")]
    argv = [w.strip('"') for w in line.split()[1:]]
    for name, value in env.items():
        argv = [a.replace(f"${name}", value) for a in argv]
    return cli_run(*argv)
