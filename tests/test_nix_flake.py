"""flake.nix and flake.lock: the lock is well formed, agrees with flake.nix and
with the recorded provenance (nix/flake-inputs.json), and the real nix accepts
it. What needs nixpkgs itself (packages, devShells, checks) cannot be evaluated
without fetching nixpkgs; these tests evaluate everything short of that."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import io
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LOCK = json.loads((REPO / "flake.lock").read_text())
PROVENANCE = json.loads((REPO / "nix" / "flake-inputs.json").read_text())
FLAKES = ["--extra-experimental-features", "nix-command flakes"]

# Where a copy of nix-community/poetry2nix's git history may be (the mirror on
# the machine the lock was written on); elsewhere the hash check is skipped.
POETRY2NIX_GIT = os.environ.get("BLACKWELL_STACK_POETRY2NIX_GIT", "/work/.mirror/nix-community+poetry2nix/repo")


def input_nodes() -> dict[str, dict]:
    root = LOCK["nodes"][LOCK["root"]]
    return {name: LOCK["nodes"][node] for name, node in root["inputs"].items()}


def parse_github_url(url: str) -> dict[str, str]:
    match = re.fullmatch(r"github:([^/]+)/([^/]+)(?:/([^?]+))?", url)
    assert match, f"not a github: flake reference: {url}"
    owner, repo, ref = match.groups()
    original = {"owner": owner, "repo": repo, "type": "github"}
    if ref:
        original["ref"] = ref
    return original


@pytest.fixture(scope="module")
def flake_inputs(nix):
    return nix.eval("(import ./flake.nix).inputs")


@pytest.fixture(scope="module")
def nix_cli():
    binary = shutil.which("nix")
    if binary is None:
        pytest.skip("the nix command is not installed (apt-get install nix-bin)")
    return binary


def test_lock_is_version_7_with_a_root_node():
    assert LOCK["version"] == 7
    assert LOCK["root"] == "root"
    assert set(LOCK["nodes"]) == {"root", *LOCK["nodes"]["root"]["inputs"].values()}


@pytest.mark.parametrize("name", sorted(input_nodes()))
def test_locked_node_is_well_formed(name):
    node = input_nodes()[name]
    locked = node["locked"]
    assert set(locked) == {"lastModified", "narHash", "owner", "repo", "rev", "type"}
    assert locked["type"] == "github"
    assert re.fullmatch(r"[0-9a-f]{40}", locked["rev"])
    assert isinstance(locked["lastModified"], int) and locked["lastModified"] > 1_500_000_000
    assert locked["narHash"].startswith("sha256-")
    assert len(base64.b64decode(locked["narHash"][len("sha256-"):], validate=True)) == 32
    # Nix writes the lock with sorted keys and two-space indentation.
    assert (REPO / "flake.lock").read_text() == json.dumps(LOCK, indent=2, sort_keys=True) + "\n"


@pytest.mark.nix
def test_lock_inputs_are_the_flake_inputs(flake_inputs):
    nodes = input_nodes()
    assert set(nodes) == set(flake_inputs)
    for name, spec in flake_inputs.items():
        assert nodes[name]["original"] == parse_github_url(spec["url"]), name
        assert nodes[name].get("flake", True) == spec.get("flake", True), name
        assert (nodes[name]["locked"]["owner"], nodes[name]["locked"]["repo"]) == (
            nodes[name]["original"]["owner"], nodes[name]["original"]["repo"])


def test_every_locked_hash_has_recorded_provenance():
    nodes = input_nodes()
    assert set(PROVENANCE["inputs"]) == set(nodes)
    for name, record in PROVENANCE["inputs"].items():
        locked = nodes[name]["locked"]
        assert (locked["rev"], locked["narHash"], locked["lastModified"]) == (
            record["rev"], record["narHash"], record["lastModified"]), name
        assert record["url"].startswith(f"github:{locked['owner']}/{locked['repo']}")
        assert record["hash_source"] and record["verified"] is True and record["reason"] is None


def test_nixpkgs_is_the_pinned_nixos_unstable_of_2026_03_03():
    nixpkgs = input_nodes()["nixpkgs"]
    assert nixpkgs["original"]["ref"] == "nixos-unstable"
    assert nixpkgs["locked"]["rev"] == "8c809a146a140c5c8806f13399592dbcb1bb5dc4"
    # 2026-03-03 12:59:14 UTC
    assert nixpkgs["locked"]["lastModified"] == 1772542754


def test_poetry2nix_is_plain_source_so_it_locks_no_inputs_of_its_own():
    node = input_nodes()["poetry2nix"]
    assert node["flake"] is False
    assert "inputs" not in node


def test_poetry2nix_narhash_is_the_nar_hash_of_the_locked_rev(nix_cli, tmp_path):
    """Recompute the narHash from the repository itself: git archive REV, nix hash path."""
    if not Path(POETRY2NIX_GIT).is_dir():
        pytest.skip(f"no git copy of nix-community/poetry2nix at {POETRY2NIX_GIT} (set BLACKWELL_STACK_POETRY2NIX_GIT)")
    locked = input_nodes()["poetry2nix"]["locked"]
    archive = subprocess.run(["git", "--git-dir", POETRY2NIX_GIT, "archive", locked["rev"]],
                             capture_output=True, check=True, timeout=120).stdout
    source = tmp_path / "source"
    source.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(source)
    nar_hash = subprocess.run([nix_cli, *FLAKES, "hash", "path", str(source)],
                              capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    assert nar_hash == locked["narHash"]
    commit_time = subprocess.run(["git", "--git-dir", POETRY2NIX_GIT, "log", "-1", "--format=%ct", locked["rev"]],
                                 capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    assert int(commit_time) == locked["lastModified"]


def copy_flake(dest: Path, *parts: str) -> Path:
    for part in ("flake.nix", "flake.lock", *parts):
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, dest / part)
        else:
            shutil.copy2(src, dest / part)
    return dest


def nix_flake(nix_cli: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([nix_cli, *FLAKES, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.nix
def test_nix_accepts_the_lock_without_updating_it(nix_cli, tmp_path):
    (tmp_path / "flake").mkdir()
    flake = copy_flake(tmp_path / "flake")
    before = (flake / "flake.lock").read_text()
    result = nix_flake(nix_cli, "flake", "lock", "--no-update-lock-file", "--offline", f"path:{flake}")
    assert result.returncode == 0, result.stderr
    assert (flake / "flake.lock").read_text() == before


@pytest.mark.nix
def test_nix_refuses_a_lock_that_no_longer_matches_flake_nix(nix_cli, tmp_path):
    """The check above means something: a changed input makes the same command fail."""
    (tmp_path / "flake").mkdir()
    flake = copy_flake(tmp_path / "flake")
    text = (flake / "flake.nix").read_text()
    (flake / "flake.nix").write_text(text.replace("github:NixOS/nixpkgs/nixos-unstable", "github:NixOS/nixpkgs/nixos-25.11"))
    result = nix_flake(nix_cli, "flake", "lock", "--no-update-lock-file", "--offline", f"path:{flake}")
    assert result.returncode != 0
    # Offline, nix fails trying to resolve the new ref; online it says the lock needs updating.
    assert "nixos-25.11" in result.stderr or "lock file" in result.stderr, result.stderr


@pytest.mark.nix
def test_flake_outputs_short_of_nixpkgs(nix_cli, tmp_path):
    """Evaluate the flake with the real nix: output names, lib, overlays, modules.

    packages/devShells/checks/apps/formatter need nixpkgs at the locked rev,
    which this machine cannot fetch; their names are checked, not their values.
    """
    (tmp_path / "flake").mkdir()
    flake = copy_flake(tmp_path / "flake", "lib", "nix", "pkgs/torch-nightly")
    expr = f"""
      let f = builtins.getFlake "path:{flake}"; in {{
        outputs = builtins.attrNames f.outputs;
        lib = builtins.attrNames f.lib;
        overlays = builtins.attrNames f.overlays;
        nixosModules = builtins.attrNames f.nixosModules;
        moduleImports = map toString f.nixosModules.sglang.imports;
        moduleConfig = {{ inherit (f.nixosModules.sglang.nixpkgs.config) cudaSupport cudaCapabilities cudaForwardCompat; }};
        capabilities = f.lib.nixpkgsConfig.cudaCapabilities;
        unverified = f.lib.pins.unverified (builtins.fromJSON (builtins.readFile {flake}/pkgs/torch-nightly/pins.json));
      }}"""
    result = nix_flake(nix_cli, "eval", "--offline", "--impure", "--json", "--expr", expr)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["outputs"] == sorted(["apps", "checks", "devShells", "formatter", "lib", "nixosModules", "overlays", "packages"])
    assert {"nixpkgsConfig", "pins"} <= set(got["lib"])
    assert got["overlays"] == ["cuda13", "default", "stack-packages", "torch-nightly"]
    assert got["nixosModules"] == ["default", "sglang"]
    assert [p.rsplit("/", 2)[-2:] for p in got["moduleImports"]] == [["modules", "sglang.nix"]]
    assert got["moduleConfig"] == {"cudaSupport": True, "cudaCapabilities": ["12.0a"], "cudaForwardCompat": False}
    assert got["capabilities"] == ["12.0a"]
    pins = json.loads((REPO / "pkgs" / "torch-nightly" / "pins.json").read_text())
    assert got["unverified"] == [
        {"package": name, "key": key}
        for name in sorted(pins["packages"]) for key in sorted(pins["packages"][name]["wheels"])
        if not pins["packages"][name]["wheels"][key]["verified"]
    ]



def test_the_module_the_flake_exports_exists():
    assert (REPO / "modules" / "sglang.nix").is_file(), "flake.nix's nixosModules.sglang imports ./modules/sglang.nix"

