"""pkgs/sglang: pins in the shared schema, and the derivation's dependency wiring
checked against the real sglang 0.5.9 wheel's METADATA (PyPI, cached).

The derivation is evaluated with the real nix; its nixpkgs arguments are
stood in by their names (no nixpkgs here), so this checks data and wiring,
not a build.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from blackwell_stack.pins.store import load_pins
from blackwell_stack.serve.profile import load_profile

WIRING = """
let
  f = import ./pkgs/sglang/default.nix;
  lib = {
    importJSON = p: builtins.fromJSON (builtins.readFile p);
    assertMsg = c: m: c || throw m;
    licenses.asl20 = "asl20";
  };
  args = builtins.mapAttrs (n: _: { pname = n; version = if n == "sgl-kernel" then "KERNEL_VERSION" else "0"; }) (builtins.functionArgs f) // {
    inherit lib;
    stdenv.hostPlatform.system = "x86_64-linux";
    python.pythonVersion = "3.12";
    buildPythonPackage = a: a;
    fetchurl = a: a;
  };
  drv = f args;
in {
  inherit (drv) pname version pythonRelaxDeps pythonRemoveDeps src;
  inherit (drv.passthru) stackReplacesPins;
  deps = map (d: d.pname) drv.dependencies;
  flashinfer = map (d: { inherit (d) pname version src; }) [ drv.passthru.flashinfer-python drv.passthru.flashinfer-cubin ];
}
"""


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(wheel: Path, dist_info: str) -> dict[str, str]:
    """Requires-Dist without extras or platform-excluded markers: name -> specifier."""
    meta = zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode()
    out = {}
    for line in meta.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req, _, marker = line[len("Requires-Dist:"):].partition(";")
        if "extra ==" in marker or "aarch64" in marker and "!=" not in marker:
            continue
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(.*)", req)
        out[norm(m.group(1))] = m.group(2).strip()
    return out


@pytest.fixture(scope="module")
def wiring(nix):
    return nix.eval(WIRING.replace("KERNEL_VERSION", "0.3.21"))


def test_pins_are_valid_verified_and_match_the_profile(repo):
    pins = load_pins(repo / "pkgs" / "sglang" / "pins.json")
    packages = pins.data["packages"]
    for name, pkg in packages.items():
        entry = pkg["wheels"]["any"]
        assert entry["verified"] and entry["hash"].startswith("sha256-"), name
        assert "PyPI's registry sha256" in entry["hash_source"]
    assert packages["flashinfer-python"]["version"] == packages["flashinfer-cubin"]["version"]
    runtime = load_profile().data["runtime"]
    assert runtime["sglang"] == packages["sglang"]["version"]
    assert runtime["flashinfer"] == packages["flashinfer-python"]["version"]


@pytest.mark.network
def test_pinned_hashes_are_pypis(repo):
    from blackwell_stack import pypi
    from blackwell_stack.hashes import sri_to_hex

    data = json.loads((repo / "pkgs" / "sglang" / "pins.json").read_text())
    for name, pkg in data["packages"].items():
        entry = pkg["wheels"]["any"]
        registry = pypi.pick(pypi.release_files(name, pkg["version"]), entry["filename"])
        assert sri_to_hex(entry["hash"]) == registry.sha256, name


@pytest.mark.network
def test_every_requirement_is_a_dependency_or_removed(wiring, pypi_file):
    wheel = pypi_file("sglang", "0.5.9", "sglang-0.5.9-py3-none-any.whl")
    reqs = requirements(wheel, "sglang-0.5.9.dist-info")
    deps = {norm(d) for d in wiring["deps"]}
    removed = {norm(d) for d in wiring["pythonRemoveDeps"]}
    missing = sorted(set(reqs) - deps - removed)
    assert missing == [], f"METADATA requirements with no dependency: {missing}"
    assert removed <= set(reqs), "pythonRemoveDeps names a package METADATA does not require"
    # Every constraint is relaxed (a name list would collide on prefixes: torch/torchaudio/...).
    assert wiring["pythonRelaxDeps"] is True
    # The exact pins the stack replaces really are in the wheel, at other versions.
    assert [norm(n) for n in wiring["stackReplacesPins"]] == ["torch", "torchaudio", "flashinfer-python", "flashinfer-cubin"]
    assert reqs["torch"] == "==2.9.1" and reqs["torchaudio"] == "==2.9.1"
    assert reqs["flashinfer-python"] == "==0.6.3" and reqs["flashinfer-cubin"] == "==0.6.3"
    # sgl-kernel must stay exact: the derivation asserts it (test below).
    assert reqs["sgl-kernel"] == "==0.3.21"


def test_a_kernel_of_another_version_is_refused(nix):
    err = nix.eval_error(WIRING.replace("KERNEL_VERSION", "0.3.20"))
    assert "requires sgl-kernel==0.3.21" in err and "0.3.20" in err


def test_derivation_takes_wheels_from_the_pins(wiring, repo):
    pins = json.loads((repo / "pkgs" / "sglang" / "pins.json").read_text())
    sg = pins["packages"]["sglang"]
    assert wiring["version"] == sg["version"]
    assert wiring["src"] == {"name": sg["wheels"]["any"]["filename"], "url": sg["wheels"]["any"]["url"], "hash": sg["wheels"]["any"]["hash"]}
    versions = {d["pname"]: d["version"] for d in wiring["flashinfer"]}
    assert versions == {"flashinfer-python": "0.6.5", "flashinfer-cubin": "0.6.5"}
    assert "sgl-kernel" in wiring["deps"] and "flashinfer-python" in wiring["deps"]


def test_unverified_pin_throws_with_the_fill_command(nix, repo, tmp_path):
    pins = json.loads((repo / "pkgs" / "sglang" / "pins.json").read_text())
    entry = pins["packages"]["sglang"]["wheels"]["any"]
    entry.update(hash=None, verified=False, reason="registry unreachable")
    # A copy of the derivation beside the edited pins, with the lib/ it imports.
    pkg_dir = tmp_path / "pkgs" / "sglang"
    pkg_dir.mkdir(parents=True)
    (pkg_dir / "pins.json").write_text(json.dumps(pins))
    (pkg_dir / "default.nix").write_text((repo / "pkgs" / "sglang" / "default.nix").read_text())
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "pins.nix").write_text((repo / "lib" / "pins.nix").read_text())
    expr = WIRING.replace("./pkgs/sglang/default.nix", str(pkg_dir / "default.nix")).replace("KERNEL_VERSION", "0.3.21")
    err = nix.eval_error(expr)
    assert "not verified (registry unreachable)" in err
    assert pins["update_command"] in err
