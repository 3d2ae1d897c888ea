"""flake.nix and flake.lock: the lock is well formed, agrees with flake.nix
(follows included) and with the recorded provenance (nix/flake-inputs.json),
the real nix accepts it, and each pinned revision of uv2nix, pyproject.nix,
build-system-pkgs and nixpkgs.lib is the one the provenance says (narHash and
commit time recomputed from the repositories' history, the last commit before
the nixpkgs lock, the three pyproject-nix repositories compatible). What needs
nixpkgs itself (packages, devShells, checks) cannot be evaluated without
fetching nixpkgs; these tests evaluate everything short of that, and
tests/test_nix_overlays.py evaluates packages, checks and overlays with a
stand-in nixpkgs."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import REPO, nix_inputs

LOCK = json.loads((REPO / "flake.lock").read_text())
PROVENANCE = json.loads((REPO / "nix" / "flake-inputs.json").read_text())
FLAKES = ["--extra-experimental-features", "nix-command flakes"]

# The inputs whose trees the tests can check (git bundles: tests/support/nix_inputs.py).
CHECKABLE = sorted(nix_inputs.BUNDLES)


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


@pytest.mark.nix
def test_follows_in_flake_nix_are_the_lock_nodes_inputs(flake_inputs):
    """One nixpkgs and one pyproject.nix for uv2nix, pyproject.nix and build-system-pkgs."""
    nodes = input_nodes()
    for name, spec in flake_inputs.items():
        follows = {child: [o["follows"]] for child, o in (spec.get("inputs") or {}).items()}
        assert nodes[name].get("inputs", {}) == follows, name
        assert PROVENANCE["inputs"][name].get("follows", {}) == {k: v[0] for k, v in follows.items()}, name
    assert nodes["uv2nix"]["inputs"] == {"nixpkgs": ["nixpkgs"], "pyproject-nix": ["pyproject-nix"]}
    assert nodes["build-system-pkgs"]["inputs"] == {
        "nixpkgs": ["nixpkgs"], "pyproject-nix": ["pyproject-nix"], "uv2nix": ["uv2nix"]}


@pytest.mark.nix
@pytest.mark.parametrize("name", CHECKABLE)
def test_input_narhash_and_commit_time_are_recomputed_from_the_repository(name):
    """tests/support/nix_inputs.py archives the locked rev and fails unless `nix hash path` is flake.lock's narHash."""
    tree = nix_inputs.source(name)
    locked = input_nodes()[name]["locked"]
    repo = tree.parent.parent / f"{name}.git"
    commit_time = subprocess.run(["git", "--git-dir", str(repo), "log", "-1", "--format=%ct", locked["rev"]],
                                 capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    assert int(commit_time) == locked["lastModified"]


@pytest.mark.nix
@pytest.mark.parametrize("name", CHECKABLE)
def test_each_input_is_the_last_commit_before_the_nixpkgs_lock(name):
    """The revision of each input matches the nixpkgs lock's date (nix/flake-inputs.json `why_this_rev`)."""
    nix_inputs.source(name)
    repo = nix_inputs._workdir() / f"{name}.git"
    cutoff = input_nodes()["nixpkgs"]["locked"]["lastModified"]
    head = subprocess.run(["git", "--git-dir", str(repo), "log", "--first-parent", "-1", "--format=%H",
                           f"--until=@{cutoff}", "HEAD"], capture_output=True, text=True, check=True, timeout=60)
    assert head.stdout.strip() == input_nodes()[name]["locked"]["rev"]


@pytest.mark.nix
def test_uv2nix_locks_the_same_pyproject_nix_the_flake_follows():
    """The pyproject.nix the flake passes to uv2nix is the one uv2nix's own lock was tested with."""
    nix_inputs.source("uv2nix")
    repo = nix_inputs._workdir() / "uv2nix.git"
    rev = input_nodes()["uv2nix"]["locked"]["rev"]
    theirs = json.loads(subprocess.run(["git", "--git-dir", str(repo), "show", f"{rev}:flake.lock"],
                                       capture_output=True, text=True, check=True, timeout=60).stdout)
    node = theirs["nodes"][theirs["nodes"]["root"]["inputs"]["pyproject-nix"]]["locked"]
    ours = input_nodes()["pyproject-nix"]["locked"]
    assert (node["rev"], node["narHash"]) == (ours["rev"], ours["narHash"])


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
    """Evaluate the flake with the real nix and its real inputs short of nixpkgs: output names, lib, the module.

    The checked input trees are added to the Nix store at the paths Nix fetches
    them to, so `builtins.getFlake` resolves them offline; nixpkgs cannot be
    fetched here, so packages/devShells/checks/apps are checked by name only
    (tests/test_nix_overlays.py evaluates them with a stand-in nixpkgs).
    """
    for name in CHECKABLE:
        nix_inputs.store_path(name)
    (tmp_path / "flake").mkdir()
    flake = copy_flake(tmp_path / "flake", "lib", "nix", "overlays", "stacks", "modules")
    expr = f"""
      let
        f = builtins.getFlake "path:{flake}";
        module = f.nixosModules.sglang {{
          pkgs.stdenv.hostPlatform.system = "x86_64-linux";
          lib = f.inputs.nixpkgs-lib.lib;
          config.services.sglang.stack = "current";
        }};
      in {{
        outputs = builtins.attrNames f.outputs;
        lib = builtins.attrNames f.lib;
        nixosModules = builtins.attrNames f.nixosModules;
        moduleKeys = builtins.attrNames module;
        moduleImports = map toString module.imports;
        packageOption = {{ inherit (module.services.sglang.package) _type priority; }};
        stacks = f.lib.stacks.names;
        libVersion = f.inputs.nixpkgs-lib.lib.trivial.release;
      }}"""
    result = nix_flake(nix_cli, "eval", "--offline", "--impure", "--json", "--expr", expr)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["outputs"] == sorted(["apps", "checks", "devShells", "formatter", "legacyPackages", "lib",
                                     "nixosModules", "overlays", "packages"])
    assert {"stacks", "nixpkgsConfig", "kernelRecipe", "kernelSources", "sglangService"} <= set(got["lib"])
    assert got["nixosModules"] == ["default", "sglang"]
    # The module brings services.sglang and the chosen stack's environment, and no nixpkgs config or overlays
    # (tests/test_serve_module_eval.py evaluates it, modules/flake-module.nix, with stand-in packages).
    assert got["moduleKeys"] == ["imports", "services"]
    assert [p.rsplit("/", 2)[-2:] for p in got["moduleImports"]] == [["modules", "sglang.nix"]]
    assert got["packageOption"] == {"_type": "override", "priority": 1000}  # lib.mkDefault
    assert got["stacks"] == ["stable", "current", "nightly"]
    assert got["libVersion"] == "26.05"
