"""The Nix version floor: the flake refuses a Nix older than its nixpkgs needs, with one message.

The floor is nixpkgs' own (its lib/minfeatures.nix, the locked one asks for
2.18): under the suite's Debian Nix 2.8 every output built from nixpkgs stops
with the message of lib/nix-floor.nix, read through the real `nix` from the
real flake (tests/support/flake_eval.py: its inputs at their locked revisions, the
stand-in nixpkgs with the locked minfeatures.nix); `lib` stays usable. The
same function lets the outputs through for a Nix that meets the floor
(minfeatures.nix evaluated with builtins.nixVersion replaced, since no such Nix
is here).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import REPO, nix_inputs
from support.flake_eval import NIX, FlakeEval

pytestmark = pytest.mark.nix

GUARDED = ["apps", "checks", "devShells", "formatter", "legacyPackages", "overlays", "packages"]


def floor_of(nix, minfeatures: Path, version: str) -> dict:
    """lib/nix-floor.nix with minfeatures.nix evaluated as a Nix reporting `version` would evaluate it."""
    return nix.eval(
        f'let features = scopedImport {{ builtins = builtins // {{ nixVersion = "{version}"; }}; }} {minfeatures};'
        f' floor = import ./lib/nix-floor.nix {{ inherit (features) missing; nixVersion = "{version}"; }};'
        ' in { inherit (floor) ok wanted message;'
        '      outputs = builtins.attrNames (floor.guard { except = [ "lib" ]; } { lib = 1; packages = 2; });'
        '      packages = builtins.tryEval (floor.guard { } { packages = 2; }).packages; }')


def test_the_floor_is_the_locked_nixpkgs_one(nix):
    minfeatures = nix_inputs.source("nixpkgs-lib") / "lib" / "minfeatures.nix"
    below, at, above = (floor_of(nix, minfeatures, v) for v in ("2.17.9", "2.18", "2.26.3"))
    assert below["ok"] is False and below["wanted"] == "Nix 2.18 or newer"
    assert below["packages"] == {"success": False, "value": False}
    assert at["ok"] is True and above["ok"] is True
    assert above["outputs"] == ["lib", "packages"] and above["packages"] == {"success": True, "value": 2}


def test_readme_states_the_floor(nix):
    minfeatures = nix_inputs.source("nixpkgs-lib") / "lib" / "minfeatures.nix"
    wanted = floor_of(nix, minfeatures, "2.8.0")["wanted"]
    version = re.search(r"Nix ([0-9.]+) or newer", wanted).group(1)
    readme = " ".join((REPO / "README.md").read_text().split())
    assert f"Nix {version} or newer" in readme
    assert "Debian 12's `nix-bin` 2.8" in readme  # and what that Nix is good for


@pytest.fixture(scope="module")
def flake(tmp_path_factory):
    """This flake (its real inputs at their locked revisions) over the stand-in nixpkgs with nixpkgs' own floor:
    the locked lib/minfeatures.nix, which asks for Nix 2.18."""
    evaluated = FlakeEval(tmp_path_factory.mktemp("floor"))
    shutil.copy2(nix_inputs.source("nixpkgs-lib") / "lib" / "minfeatures.nix",
                 evaluated.nixpkgs / "lib" / "minfeatures.nix")
    return evaluated


def nix_version() -> str:
    return subprocess.run(["nix", "--version"], capture_output=True, text=True, check=True).stdout.split()[-1]


@pytest.mark.parametrize("output", GUARDED)
def test_an_older_nix_is_refused_with_one_message(flake, output):
    version = nix_version()
    if not version.startswith("2.") or int(version.split(".")[1]) >= 18:
        pytest.skip(f"this Nix ({version}) meets the floor; the refusal needs an older one")
    message = flake.eval_error(output, "builtins.attrNames")
    assert f"blackwell-stack: this flake's nixpkgs needs Nix 2.18 or newer; this is Nix {version}." in message
    assert "Missing (nixpkgs' lib/minfeatures.nix): `builtins.nixVersion` reports at least 2.18." in message
    assert "Install Nix 2.18 or newer" in message


def test_lib_stays_usable_below_the_floor(flake):
    """To other flakes and builtins.getFlake: `nix eval .#lib` looks in packages first, and stops there."""
    expr = (f'let f = builtins.getFlake "path:{flake.flake}"; in'
            ' { stacks = f.lib.stacks.names; modules = builtins.attrNames f.nixosModules; }')
    result = subprocess.run([*NIX, "eval", "--offline", "--impure", "--json", "--expr", expr], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"stacks": ["stable", "current", "nightly"], "modules": ["default", "sglang"]}
