"""lib.nixpkgsConfig (nix/nixpkgs-config.nix over nix/nixpkgs-config.json): the
config the flake imports nixpkgs with, evaluated with the real nix. The
predicate is given packages shaped as nixpkgs makes them (pname, meta.license
as a record or a list); license records are those of nixpkgs at the pinned rev
(lib/licenses.nix, _cuda/lib/licenses.nix, the cudnn fixup)."""

from __future__ import annotations

import json

import pytest
from support import REPO

pytestmark = pytest.mark.nix

DATA = json.loads((REPO / "nix" / "nixpkgs-config.json").read_text())

NVIDIA_CUDA_REDIST = '{ shortName = "CUDA EULA"; fullName = "CUDA Toolkit End User License Agreement (EULA)"; free = false; redistributable = true; }'
CUDNN = '{ shortName = "cuDNN EULA"; fullName = "NVIDIA cuDNN Software License Agreement (EULA)"; free = false; }'
ISSL = '{ fullName = "Intel Simplified Software License"; free = false; }'
UNFREE_REDIST = '{ fullName = "Unfree redistributable"; free = false; redistributable = true; }'
BSD3 = '{ spdxId = "BSD-3-Clause"; fullName = "BSD 3-clause"; }'


def allowed(nix, package: str) -> bool:
    return nix.eval(f"(import ./lib).nixpkgsConfig.allowUnfreePredicate {package}")


def test_cuda_settings_come_from_the_json(nix):
    got = nix.eval("{ inherit ((import ./lib).nixpkgsConfig) cudaSupport cudaCapabilities cudaForwardCompat; }")
    assert got == {k: DATA[k] for k in ("cudaSupport", "cudaCapabilities", "cudaForwardCompat")}
    # SM120's architecture-specific features (NVFP4) need "12.0a", which needs forward compat off.
    assert got["cudaCapabilities"] == ["12.0a"] and got["cudaForwardCompat"] is False


@pytest.mark.parametrize(
    ("package", "expected"),
    [
        (f'{{ pname = "cuda_nvcc"; meta.license = {NVIDIA_CUDA_REDIST}; }}', True),
        (f'{{ pname = "cudnn"; meta.license = {CUDNN}; }}', True),
        (f'{{ name = "libcublas-13.0.2.14"; meta.license = [ {NVIDIA_CUDA_REDIST} ]; }}', True),
        # nixpkgs' torch-bin and triton-bin are not used (the stacks' torch is the lock's wheel): refused.
        (f'{{ pname = "torch"; meta.license = [ {BSD3} {ISSL} {UNFREE_REDIST} ]; }}', False),
        (f'{{ pname = "triton"; meta.license = [ {UNFREE_REDIST} ]; }}', False),
        (f'{{ pname = "nvidia-x11"; meta.license = {UNFREE_REDIST}; }}', True),
        # Anything else unfree stays refused, even next to a CUDA license.
        (f'{{ pname = "unrar"; meta.license = {UNFREE_REDIST}; }}', False),
        (f'{{ pname = "mkl"; meta.license = [ {ISSL} ]; }}', False),
        (f'{{ pname = "some-cuda-app"; meta.license = [ {NVIDIA_CUDA_REDIST} {ISSL} ]; }}', False),
    ],
)
def test_unfree_predicate(nix, package, expected):
    assert allowed(nix, package) is expected


def test_every_allowed_name_and_license_says_why():
    for license in DATA["unfree"]["licenses"]:
        assert license["shortName"] and license["source"]
    for package in DATA["unfree"]["packages"]:
        assert package["name"] and package["why"]
