"""The real flake inputs, at the revisions flake.lock pins, for tests that evaluate them.

Machines that run the tests may reach no GitHub, so the inputs come from git
bundles of each repository's public history: $BLACKWELL_STACK_NIX_INPUTS, or
else the directory `shared/nix-inputs` next to the checkout. Each tree
is `git archive`d at the locked rev and used only if `nix hash path` gives
flake.lock's narHash for it: the test then evaluates exactly what a user's
Nix fetches. Without a bundle the test is skipped, saying which and where.

    tree = nix_inputs.source("uv2nix")        # Path of the checked tree
    path = nix_inputs.store_path("uv2nix")    # the same tree in the Nix store, as a flake input
"""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from support import REPO

ENV = "BLACKWELL_STACK_NIX_INPUTS"
# flake.lock input name -> the bundle of its repository
BUNDLES = {
    "uv2nix": "uv2nix.bundle",
    "pyproject-nix": "pyproject.nix.bundle",
    "build-system-pkgs": "build-system-pkgs.bundle",
    "nixpkgs-lib": "nixpkgs.lib.bundle",
}
NIX = ["nix", "--extra-experimental-features", "nix-command"]


def bundles_dir() -> Path:
    return Path(os.environ.get(ENV) or REPO.parent / "shared" / "nix-inputs")


def locked(name: str) -> dict:
    lock = json.loads((REPO / "flake.lock").read_text())
    return lock["nodes"][lock["nodes"]["root"]["inputs"][name]]["locked"]


@functools.cache
def _workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="bws-nix-inputs-"))


@functools.cache
def source(name: str) -> Path:
    """The input's tree at its locked rev, its narHash checked against flake.lock (else skip or fail)."""
    bundle = bundles_dir() / BUNDLES[name]
    if not bundle.is_file():
        pytest.skip(f"no git bundle of the {name} input at {bundle} (set {ENV} to a directory of "
                    f"{', '.join(BUNDLES.values())})")
    if shutil.which("git") is None or shutil.which("nix") is None:
        pytest.skip("git and nix are needed to check an input's tree")
    rev, nar = locked(name)["rev"], locked(name)["narHash"]
    repo = _workdir() / f"{name}.git"
    if not repo.exists():
        subprocess.run(["git", "clone", "-q", "--bare", str(bundle), str(repo)], check=True, timeout=600,
                       capture_output=True)
    archive = subprocess.run(["git", "--git-dir", str(repo), "archive", rev], capture_output=True, timeout=600)
    if archive.returncode != 0:
        pytest.fail(f"{bundle} has no commit {rev} (flake.lock's {name}): {archive.stderr.decode()[-300:]}")
    tree = _workdir() / name / "source"
    tree.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="tar")
    got = subprocess.run([*NIX, "hash", "path", str(tree)], capture_output=True, text=True, check=True,
                         timeout=600).stdout.strip()
    if got != nar:
        pytest.fail(f"{name} at {rev} from {bundle} hashes to {got}, flake.lock says {nar}")
    return tree


@functools.cache
def store_path(name: str) -> str:
    """The checked tree added to the Nix store: the path Nix itself fetches the locked input to."""
    tree = source(name)
    path = subprocess.run(["nix-store", "--add", str(tree)], capture_output=True, text=True, timeout=600)
    if path.returncode != 0:
        pytest.skip(f"cannot add {name} to the Nix store here: {path.stderr.strip()[-200:]}")
    return path.stdout.strip()
