"""`blackwell-stack pins flake-inputs`: nix/flake-inputs.json brought up to flake.lock after `nix flake update`.

The state after an update is made from the repository's own data: a record that still names older values stands
for the lock `nix flake update` just rewrote. GitHub's archives are served from a file: URL laid out as GitHub's,
holding the real pyproject.nix tree at its locked rev (tests/support/nix_inputs.py checks that tree against the
lock's narHash); the command hashes it with the real nix-prefetch-url. nixpkgs has no archive there, so its
narHash is taken from the lock, and the record says so.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from conftest import copy_data_root
from support import nix_inputs
from support.cli import run as cli

pytestmark = pytest.mark.nix

LOCK = json.loads((nix_inputs.REPO / "flake.lock").read_text())
OLD_REV = "0" * 40


def _node(name: str) -> dict:
    return LOCK["nodes"][LOCK["nodes"][LOCK["root"]]["inputs"][name]]


@pytest.fixture
def github(tmp_path) -> str:
    """A file: URL with GitHub's archive of pyproject.nix at its locked rev (a top directory, as GitHub's has)."""
    tree = nix_inputs.source("pyproject-nix")
    locked = _node("pyproject-nix")["locked"]
    archive = tmp_path / "github" / locked["owner"] / locked["repo"] / "archive" / f"{locked['rev']}.tar.gz"
    archive.parent.mkdir(parents=True)
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname=f"{locked['repo']}-{locked['rev']}")
    return (tmp_path / "github").as_uri()


def _stale_root(tmp_path: Path) -> Path:
    """A data root whose nix/flake-inputs.json is from before the update: pyproject.nix and nixpkgs at other revs,
    nixpkgs-lib not recorded at all, and an input the lock no longer has."""
    root = copy_data_root(tmp_path / "root")
    path = root / "nix" / "flake-inputs.json"
    data = json.loads(path.read_text())
    for name in ("pyproject-nix", "nixpkgs"):
        data["inputs"][name] = {**data["inputs"][name], "rev": OLD_REV, "narHash": "sha256-" + "A" * 43 + "="}
    del data["inputs"]["nixpkgs-lib"]
    data["inputs"]["flake-utils"] = {**data["inputs"]["uv2nix"], "url": "github:numtide/flake-utils"}
    path.write_text(json.dumps(data, indent=2) + "\n")
    return root


def test_flake_inputs_records_the_lock_computing_what_it_can(tmp_path, github):
    root = _stale_root(tmp_path)
    before = json.loads((root / "nix" / "flake-inputs.json").read_text())
    result = cli("pins", "flake-inputs", "--github", github, root=root)
    assert result.returncode == 0, result.stderr
    after = json.loads((root / "nix" / "flake-inputs.json").read_text())
    assert set(after["inputs"]) == set(LOCK["nodes"][LOCK["root"]]["inputs"])
    for name, record in after["inputs"].items():
        locked = _node(name)["locked"]
        assert (record["rev"], record["narHash"], record["lastModified"]) == (
            locked["rev"], locked["narHash"], locked["lastModified"]), name
        assert record["verified"] is True and record["reason"] is None
    # Computed: the archive served here hashes to the lock's narHash.
    pyproject = after["inputs"]["pyproject-nix"]
    assert pyproject["hash_checked"] == "computed" and "nix-prefetch-url --unpack" in pyproject["hash_source"]
    assert pyproject["url"] == "github:pyproject-nix/pyproject.nix" and pyproject["follows"] == {"nixpkgs": "nixpkgs"}
    # Not computed (no archive of it here): taken from the lock, saying so, as is nixpkgs.lib's new record.
    for name in ("nixpkgs", "nixpkgs-lib"):
        assert after["inputs"][name]["hash_checked"] == "lock", name
        assert "taken from flake.lock" in after["inputs"][name]["hash_source"], name
    # Untouched records keep their provenance; the input the lock dropped is gone.
    assert after["inputs"]["uv2nix"] == before["inputs"]["uv2nix"]
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if line.split()}
    assert "computed" in lines["pyproject-nix"] and "from the lock" in lines["nixpkgs"]
    assert "unchanged" in lines["uv2nix"] and "dropped" in lines["flake-utils"]


def test_a_computed_hash_other_than_the_locks_writes_nothing(tmp_path, github):
    root = _stale_root(tmp_path)
    lock = json.loads((root / "flake.lock").read_text())
    lock["nodes"]["pyproject-nix"]["locked"]["narHash"] = "sha256-" + "B" * 43 + "="
    (root / "flake.lock").write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    before = (root / "nix" / "flake-inputs.json").read_bytes()
    result = cli("pins", "flake-inputs", "--github", github, root=root)
    assert result.returncode == 5 and "Traceback" not in result.stderr
    assert "pyproject-nix" in result.stderr and "hashes to sha256-" in result.stderr
    assert (root / "nix" / "flake-inputs.json").read_bytes() == before


def test_offline_takes_every_changed_hash_from_the_lock(tmp_path):
    root = _stale_root(tmp_path)
    result = cli("pins", "flake-inputs", "--offline", root=root)
    assert result.returncode == 0, result.stderr
    after = json.loads((root / "nix" / "flake-inputs.json").read_text())
    assert after["inputs"]["pyproject-nix"]["hash_checked"] == "lock"
    assert after["inputs"]["pyproject-nix"]["hash_source"].endswith("(--offline)")
    # What `pins show` then says of it: the lock's hash, not checked here.
    shown = json.loads(cli("pins", "show", "--json", root=root).stdout)
    row = next(r for r in shown["pins"] if r["what"] == "flake input pyproject-nix")
    assert row["verified"] is True and row["hash_checked"] == "lock"
