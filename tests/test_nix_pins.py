"""lib/pins.nix (what the torch-nightly overlay evaluates) against
blackwell_stack.pins.store on the same JSON: same pins, same unverified list,
same refusal naming the same fill command."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urljoin

import pytest

from blackwell_stack import pypi
from blackwell_stack.download import download
from blackwell_stack.errors import StackError
from blackwell_stack.hashes import hex_to_sri, sha256_file
from blackwell_stack.paths import cache_dir
from blackwell_stack.pins.store import load_pins, unverified, validate, wheel_pin

pytestmark = pytest.mark.nix

REPO = Path(__file__).resolve().parent.parent
TORCH_PINS = "pkgs/torch-nightly/pins.json"
OVERLAY_PINS = "(import ./nix/torch-nightly-pins.nix)"


@pytest.fixture
def torch_pins(monkeypatch):
    # Relative, as the overlay names the file in its messages.
    monkeypatch.chdir(REPO)
    return load_pins(TORCH_PINS)


def python_error(pins, *args) -> StackError:
    with pytest.raises(StackError) as info:
        wheel_pin(pins, *args)
    return info.value


def test_unverified_lists_agree(nix, torch_pins):
    got = nix.eval(f"(import ./lib).pins.unverified {OVERLAY_PINS}.pins")
    assert got == unverified(torch_pins)


def test_overlay_reads_the_pins_file_the_cli_reads(nix, torch_pins):
    assert nix.eval(f"{OVERLAY_PINS}.file") == TORCH_PINS
    assert nix.eval(f"{OVERLAY_PINS}.pins") == torch_pins.data


@pytest.mark.parametrize("python_version", ["3.12", "3.13"])
def test_pinned_python_versions_agree(nix, torch_pins, python_version):
    key = f"x86_64-linux-{python_version.replace('.', '')}"
    got = nix.eval(f'({OVERLAY_PINS}.forPython "x86_64-linux" "{python_version}").pinned')
    assert got == (key in torch_pins.packages["torch"]["wheels"])


@pytest.mark.parametrize("package", ["torch", "triton"])
def test_unverified_pin_throws_with_the_fill_command(nix, torch_pins, package):
    entry = torch_pins.packages[package]["wheels"].get("x86_64-linux-312")
    if entry is None or entry["verified"]:
        pytest.skip(f"{package} for x86_64-linux-312 is pinned and verified now")
    stderr = nix.eval_error(f'({OVERLAY_PINS}.forPython "x86_64-linux" "3.12").{package}')
    error = python_error(torch_pins, package, "x86_64-linux", "3.12")
    assert error.message in stderr
    assert f"Fill it in with: {torch_pins.update_command}" in stderr
    assert error.hint == f"fill it in with: {torch_pins.update_command}"


def test_missing_python_version_throws_listing_what_is_pinned(nix, torch_pins):
    stderr = nix.eval_error(f'({OVERLAY_PINS}.forPython "x86_64-linux" "3.13").torch')
    error = python_error(torch_pins, "torch", "x86_64-linux", "3.13")
    assert error.message in stderr
    assert f"Add it with: {torch_pins.update_command}" in stderr


@pytest.mark.network
def test_verified_pin_gives_the_same_fetchurl_arguments(nix, tmp_path):
    """A verified pin built from a real PyPI wheel: Nix and Python return the same fetchurl arguments."""
    name, version = "packaging", "24.2"
    release = pypi.pick(pypi.release_files(name, version), "*.whl")
    # Some PyPI mirrors list file URLs relative to the JSON document.
    url = urljoin(f"{pypi.PYPI_JSON}/{name}/json", release.url)
    wheel = cache_dir("pypi", name, version) / release.filename
    if not (wheel.exists() and sha256_file(wheel) == release.sha256):
        download(url, wheel, expected_sha256=release.sha256)
    sri = hex_to_sri(sha256_file(wheel))
    assert sri == hex_to_sri(release.sha256)
    data = {
        "schema_version": 1,
        "description": "one verified pin, from PyPI",
        "update_command": f"blackwell-stack pins update {name} --version {version}",
        "packages": {name: {"version": version, "wheels": {"x86_64-linux-312": {
            "filename": release.filename, "url": url, "hash": sri,
            "hash_source": "computed here from the PyPI download", "verified": True, "reason": None,
        }}}},
    }
    path = tmp_path / "pins.json"
    validate(data, path)
    path.write_text(json.dumps(data))
    got = nix.eval(
        f'(import ./lib/pins.nix).wheel {{ pins = builtins.fromJSON (builtins.readFile {path}); file = "{path}"; }}'
        f' "{name}" "x86_64-linux" "3.12"'
    )
    assert got == wheel_pin(load_pins(path), name, "x86_64-linux", "3.12")
    assert got == {"pname": name, "version": version, "name": release.filename, "url": url, "hash": sri}


@pytest.mark.parametrize("package", ["sglang", "flashinfer-python", "flashinfer-cubin"])
def test_pure_python_wheels_resolve_through_the_any_key_on_both_sides(nix, package, monkeypatch):
    """pkgs/sglang/pins.json pins pure wheels under "any"; lib.pins and the store pick them for any system."""
    monkeypatch.chdir(REPO)
    pins = load_pins("pkgs/sglang/pins.json")
    expr = (
        '(import ./lib/pins.nix).wheel { pins = builtins.fromJSON (builtins.readFile ./pkgs/sglang/pins.json); '
        f'file = "pkgs/sglang/pins.json"; }} "{package}" "x86_64-linux" "3.12"'
    )
    assert nix.eval(expr) == wheel_pin(pins, package, "x86_64-linux", "3.12")
    assert wheel_pin(pins, package, "aarch64-linux", "3.13")["name"].endswith("-none-any.whl")
