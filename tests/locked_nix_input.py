"""A flake input at its locked revision, for tests that evaluate with the real thing.

The tests cannot fetch from GitHub. A git bundle with the input's public
history (`<name>.bundle`) is looked for in $BLACKWELL_STACK_NIX_INPUTS, else in
`shared/nix-inputs` beside the checkout. The locked revision is taken out with
`git archive` and used only if `nix hash path` of the tree equals the narHash
that flake.lock records for the input, so the tree is the one users' machines
fetch. Without the bundle, or while flake.lock has no such input, the test is
skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NIX_COMMAND = ["--extra-experimental-features", "nix-command"]


def inputs_dir() -> Path:
    return Path(os.environ.get("BLACKWELL_STACK_NIX_INPUTS") or REPO.parent / "shared" / "nix-inputs")


def locked_node(name: str, lock: Path = REPO / "flake.lock") -> dict | None:
    """flake.lock's node for the root input `name` (its `locked` and `original`), or None."""
    data = json.loads(lock.read_text())
    key = data["nodes"][data["root"]].get("inputs", {}).get(name)
    return data["nodes"][key] if isinstance(key, str) else None


def locked_tree(name: str, bundle: str, dest: Path) -> Path:
    """The input's source tree at its locked revision, narHash-checked, under dest."""
    node = locked_node(name)
    if node is None:
        pytest.skip(f"flake.lock has no input {name!r} yet, so there is no locked narHash to check a copy against")
    locked = node["locked"]
    bundle_path = inputs_dir() / bundle
    if not bundle_path.is_file():
        pytest.skip(f"no git bundle of {locked.get('owner')}/{locked.get('repo')} at {bundle_path} (set BLACKWELL_STACK_NIX_INPUTS)")
    nix = shutil.which("nix")
    if nix is None:
        pytest.skip("the nix command is not installed (apt-get install nix-bin)")
    clone = dest / "git"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(bundle_path), str(clone)],
                   check=True, capture_output=True, timeout=300)
    archive = subprocess.run(["git", "-C", str(clone), "archive", locked["rev"]],
                             check=True, capture_output=True, timeout=300).stdout
    tree = dest / "source"
    tree.mkdir()
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, capture_output=True, timeout=300)
    nar_hash = subprocess.run([nix, *NIX_COMMAND, "hash", "path", str(tree)],
                              check=True, capture_output=True, text=True, timeout=300).stdout.strip()
    assert nar_hash == locked["narHash"], (
        f"{bundle_path} at {locked['rev']} hashes to {nar_hash}, but flake.lock locks {name} with {locked['narHash']}"
    )
    return tree
