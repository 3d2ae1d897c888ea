"""`pins vendor` adds a kept wheel to a real Nix store at the path fetchurl will look for."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest
from support.index_server import build_wheel

from blackwell_stack.cli import main
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


def lock_naming(tmp_path, wheel, digest):
    """A uv.lock that takes `wheel` from a directory of kept wheels, as `stack lock NAME --wheels DIR` writes it."""
    path = tmp_path / "uv.lock"
    path.write_text(
        'version = 1\nrevision = 3\nrequires-python = "==3.12.*"\n\n'
        f'[[package]]\nname = "torch"\nversion = "2.12.0.dev20260307+cu130"\n'
        'source = { registry = "wheels" }\n'
        f'wheels = [\n    {{ path = "{wheel.name}", hash = "sha256:{digest}" }},\n]\n')
    return path


def fetchurl_out_path(nix, name: str, sri: str) -> str:
    """outPath of a flat sha256 fixed-output derivation: what nixpkgs' fetchurl (and torch-bin's src) is."""
    expr = (
        f'(derivation {{ name = "{name}"; system = "x86_64-linux"; builder = "/bin/sh"; '
        f'outputHashMode = "flat"; outputHashAlgo = "sha256"; outputHash = "{sri}"; }}).outPath'
    )
    return nix.eval(expr)


def test_vendor_adds_the_exact_fixed_output_path(kept_wheel, tmp_path, nix):
    lock = lock_naming(tmp_path, kept_wheel, sha256_file(kept_wheel))
    sri = hex_to_sri(sha256_file(kept_wheel))
    # A copy kept under its URL-escaped name still maps to the locked file name.
    escaped = tmp_path / "kept" / kept_wheel.name.replace("+", "%2B")
    escaped.parent.mkdir()
    shutil.copy(kept_wheel, escaped)

    result = vendor(escaped, [lock])

    assert (result.lock, result.package) == (str(lock), "torch")
    assert result.store_path == fetchurl_out_path(nix, kept_wheel.name, sri)
    assert os.path.exists(result.store_path)
    assert sha256_file(result.store_path) == sha256_file(kept_wheel)
    expected = subprocess.run(["nix-store", "--print-fixed-path", "sha256", sha256_file(kept_wheel), kept_wheel.name],
                              capture_output=True, text=True, check=True).stdout.strip()
    assert result.store_path == expected


def test_vendor_refuses_a_different_file_and_adds_nothing(kept_wheel, tmp_path, nix):
    lock = lock_naming(tmp_path, kept_wheel, "ab" * 32)
    with pytest.raises(HashMismatch, match="nothing was added"):
        vendor(kept_wheel, [lock])
    assert not os.path.exists(fetchurl_out_path(nix, kept_wheel.name, hex_to_sri(sha256_file(kept_wheel))))


def test_vendor_of_a_file_no_lock_names_says_how_to_lock_it(tmp_path, kept_wheel, capsys):
    other = build_wheel(tmp_path, "triton", "9.9.9")
    with pytest.raises(StackError, match=r"no stack.s uv\.lock names triton-9\.9\.9") as err:
        vendor(other, [lock_naming(tmp_path, kept_wheel, sha256_file(kept_wheel))])
    assert "stack lock NAME --wheels DIR" in err.value.hint
    assert main(["pins", "vendor", str(other)]) == 2  # the CLI matches every stack's lock
    assert "no stack's uv.lock names" in capsys.readouterr().err
