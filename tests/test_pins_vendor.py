"""`pins vendor` adds a kept wheel to a real Nix store at the path fetchurl will look for."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid

import pytest
from support.index_server import build_wheel

from blackwell_stack.cli import main
from blackwell_stack.data.pins import load_pins
from blackwell_stack.errors import HashMismatch, StackError
from blackwell_stack.hashes import hex_to_sri, sha256_file
from blackwell_stack.pins.vendor import vendor

pytestmark = pytest.mark.nix


@pytest.fixture
def kept_wheel(tmp_path):
    """A real wheel with unique content, so every run adds a path the store does not have yet."""
    if shutil.which("nix-store") is None:
        pytest.skip("nix-store is not installed (apt-get install nix-bin); .ci/run installs it")
    return build_wheel(tmp_path, "torch", "2.12.0.dev20260307+cu130", payload=f"RUN = {uuid.uuid4().hex!r}\n")


def pins_for(tmp_path, wheel, *, hash_value, verified):
    data = {
        "schema_version": 1,
        "description": "test pins",
        "update_command": "blackwell-stack pins update torch --date 20260307 --cuda cu130 --python 3.12",
        "packages": {"torch": {"version": "2.12.0.dev20260307+cu130", "wheels": {"x86_64-linux-312": {
            "filename": wheel.name,
            "url": "https://download-r2.pytorch.org/whl/nightly/cu130/" + wheel.name.replace("+", "%2B"),
            "hash": hash_value,
            "hash_source": "test" if hash_value else None, "hash_checked": "computed" if hash_value else "none",
            "verified": verified,
            "reason": None if verified else "not downloaded yet",
        }}}},
    }
    path = tmp_path / "pins.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def fetchurl_out_path(nix, name: str, sri: str) -> str:
    """outPath of a flat sha256 fixed-output derivation: what nixpkgs' fetchurl (and torch-bin's src) is."""
    expr = (
        f'(derivation {{ name = "{name}"; system = "x86_64-linux"; builder = "/bin/sh"; '
        f'outputHashMode = "flat"; outputHashAlgo = "sha256"; outputHash = "{sri}"; }}).outPath'
    )
    return nix.eval(expr)


def test_vendor_adds_the_exact_fixed_output_path(kept_wheel, tmp_path, nix):
    sri = hex_to_sri(sha256_file(kept_wheel))
    pins_path = pins_for(tmp_path, kept_wheel, hash_value=sri, verified=True)
    # A copy kept under its URL-escaped name still maps to the pin's file name.
    escaped = tmp_path / "kept" / kept_wheel.name.replace("+", "%2B")
    escaped.parent.mkdir()
    shutil.copy(kept_wheel, escaped)

    result = vendor(escaped, [pins_path])

    assert result.store_path == fetchurl_out_path(nix, kept_wheel.name, sri)
    assert os.path.exists(result.store_path)
    assert sha256_file(result.store_path) == sha256_file(kept_wheel)
    expected = subprocess.run(["nix-store", "--print-fixed-path", "sha256", sha256_file(kept_wheel), kept_wheel.name],
                              capture_output=True, text=True, check=True).stdout.strip()
    assert result.store_path == expected


def test_vendor_refuses_a_different_file_and_adds_nothing(kept_wheel, tmp_path, nix):
    pinned = hex_to_sri("ab" * 32)
    pins_path = pins_for(tmp_path, kept_wheel, hash_value=pinned, verified=True)
    with pytest.raises(HashMismatch, match="nothing was added"):
        vendor(kept_wheel, [pins_path])
    assert not os.path.exists(fetchurl_out_path(nix, kept_wheel.name, hex_to_sri(sha256_file(kept_wheel))))


def test_vendor_record_fills_an_unverified_pin(kept_wheel, tmp_path, nix):
    pins_path = pins_for(tmp_path, kept_wheel, hash_value=None, verified=False)
    with pytest.raises(StackError, match="pass --record"):
        vendor(kept_wheel, [pins_path])

    code = main(["pins", "vendor", str(kept_wheel), "--file", str(pins_path), "--record"])
    assert code == 0
    entry = load_pins(pins_path).packages["torch"]["wheels"]["x86_64-linux-312"]
    assert entry["verified"] is True
    assert entry["hash"] == hex_to_sri(sha256_file(kept_wheel))
    assert "local copy" in entry["hash_source"]
    assert os.path.exists(fetchurl_out_path(nix, kept_wheel.name, entry["hash"]))


def test_vendor_of_an_unpinned_file_lists_the_pins(tmp_path, kept_wheel, repo):
    other = build_wheel(tmp_path, "triton", "9.9.9")
    with pytest.raises(StackError, match="matches no pin"):
        vendor(other, [repo / "stacks/nightly/pins.json"])
