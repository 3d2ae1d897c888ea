"""Evaluating this flake's own outputs with the real `nix` (2.8 here), its
real inputs, and a stand-in for nixpkgs.

nixpkgs itself cannot be evaluated here (it needs Nix >= 2.18, and 4 GB to
fetch), so the flake is evaluated as a user's Nix would evaluate it with
`--override-input nixpkgs` pointing at tests/nixpkgs/: the flake's own
Nix code, uv2nix, pyproject.nix and build-system-pkgs (their trees checked
against flake.lock's narHash, tests/support/nix_inputs.py) run for real, on a package
set whose derivations are recorders of their arguments (tests/nixpkgs/default.nix
says what it holds). nixpkgs.lib is the locked nixpkgs-lib, copied beside
the stand-in.

    flake = FlakeEval(workdir)
    flake.eval("checks.x86_64-linux", "builtins.attrNames")      # JSON, as `nix eval --json --apply`
    flake.eval("overlays", f"o: ... (import {flake.nixpkgs} {{ ... }}) ...")   # the stand-in by path

`flake.nix("flake", "check", "--no-build")` runs another nix command on it.
`flake.nixpkgs` is the stand-in's directory: an `--apply` function may
import it to make another package set (a host's), with `overlays` and a
`label` that every derivation it records carries as `recordedIn`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from support import REPO, nix_inputs

# What the flake reads of its own tree: its Nix code and data, and the CLI's sources.
FLAKE_PARTS = ("flake.nix", "flake.lock", "pyproject.toml", "README.md", "lib", "nix", "overlays", "pkgs",
               "modules", "patches", "stacks", "src")
NIX = ["nix", "--extra-experimental-features", "nix-command flakes"]
# The stand-in's label of the flake's own nixpkgs (tests/nixpkgs/default.nix `label`).
FLAKE_NIXPKGS = "nixpkgs"


class FlakeEval:
    def __init__(self, workdir: Path):
        for name in nix_inputs.BUNDLES:
            nix_inputs.store_path(name)  # the locked inputs, where Nix looks for them offline
        self.flake = workdir / "flake"
        self.flake.mkdir()
        for part in FLAKE_PARTS:
            source = REPO / part
            if source.is_dir():
                shutil.copytree(source, self.flake / part, ignore=shutil.ignore_patterns("wheels", ".venv",
                                                                                          "__pycache__"))
            else:
                shutil.copy2(source, self.flake / part)
        self.nixpkgs = workdir / "nixpkgs"
        shutil.copytree(REPO / "tests" / "nixpkgs", self.nixpkgs)
        shutil.copytree(nix_inputs.source("nixpkgs-lib") / "lib", self.nixpkgs / "lib")
        # The stand-in runs on the Nix here (2.8), so it states no Nix floor: nixpkgs' own
        # lib/minfeatures.nix (2.18), which the flake refuses an older Nix by, is tests/test_nix_floor.py's.
        shutil.copy2(REPO / "tests" / "nixpkgs" / "minfeatures.nix", self.nixpkgs / "lib" / "minfeatures.nix")

    def nix(self, *command: str, flake: Path | None = None) -> subprocess.CompletedProcess:
        """`nix <command...> FLAKE` on the flake (or a changed copy of it), the stand-in as its nixpkgs."""
        return subprocess.run(
            [*NIX, *command, "--offline", "--no-write-lock-file", "--override-input", "nixpkgs",
             f"path:{self.nixpkgs}", f"path:{flake or self.flake}"],
            capture_output=True, text=True, timeout=300)

    def run(self, attr: str, apply: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*NIX, "eval", "--offline", "--impure", "--no-write-lock-file", "--json",
             "--override-input", "nixpkgs", f"path:{self.nixpkgs}",
             f"path:{self.flake}#{attr}", "--apply", apply],
            capture_output=True, text=True, timeout=300)

    def eval(self, attr: str, apply: str):
        """`nix eval --json --apply` of the flake's attribute (resolved as `nix build` resolves it)."""
        result = self.run(attr, apply)
        if result.returncode != 0:
            raise AssertionError(f"nix eval {attr} failed:\n{result.stderr[-4000:]}")
        return json.loads(result.stdout)

    def eval_error(self, attr: str, apply: str) -> str:
        """The evaluation's error, whitespace normalised (Nix wraps long messages)."""
        result = self.run(attr, apply)
        assert result.returncode != 0, f"expected nix eval {attr} to fail, got {result.stdout[:500]}"
        return " ".join(result.stderr.split())
