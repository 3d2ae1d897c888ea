"""lib/pins.nix (the flake's `lib.pins`), the one lookup of a wheel pin for fetchurl, on real pins files:
the nightly stack's (stacks/nightly/pins.json) and pins of real PyPI wheels. Its unverified list is the
one `plan` shows (blackwell_stack.data.pins)."""

from __future__ import annotations

import json
from urllib.parse import urljoin

import pytest
from support import REPO

from blackwell_stack import pypi
from blackwell_stack.data.pins import load_pins, unverified, validate
from blackwell_stack.download import download
from blackwell_stack.hashes import hex_to_sri, sha256_file
from blackwell_stack.paths import cache_dir

pytestmark = pytest.mark.nix

TORCH_PINS = "stacks/nightly/pins.json"
PINS = f"(builtins.fromJSON (builtins.readFile ./{TORCH_PINS}))"
WHEEL = f'(import ./lib/pins.nix).wheel {{ pins = {PINS}; file = "{TORCH_PINS}"; }}'


@pytest.fixture
def torch_pins(monkeypatch):
    # Relative, as lib.pins names the file in its messages.
    monkeypatch.chdir(REPO)
    return load_pins(TORCH_PINS)


def test_unverified_lists_agree(nix, torch_pins):
    got = nix.eval(f"(import ./lib).pins.unverified {PINS}")
    assert got == unverified(torch_pins)


@pytest.mark.parametrize("package", ["torch", "triton"])
def test_unverified_pin_throws_with_the_fill_command(nix, torch_pins, package):
    entry = torch_pins.packages[package]["wheels"].get("x86_64-linux-312")
    if entry is None or entry["verified"]:
        pytest.skip(f"{package} for x86_64-linux-312 is pinned and verified now")
    stderr = nix.eval_error(f'{WHEEL} "{package}" "x86_64-linux" "3.12"')
    reason = f" ({entry['reason']})" if entry.get("reason") else ""
    assert f"the pin of {package} for x86_64-linux-312 in {TORCH_PINS} is not verified{reason}." in stderr
    assert f"Fill it in with: {torch_pins.update_command}" in stderr


def test_missing_python_version_throws_listing_what_is_pinned(nix, torch_pins):
    stderr = nix.eval_error(f'{WHEEL} "torch" "x86_64-linux" "3.13"')
    assert f"{TORCH_PINS} pins no torch wheel for x86_64-linux-313 (pinned: x86_64-linux-312)" in stderr
    assert f"Add it with: {torch_pins.update_command}" in stderr


@pytest.mark.network
def test_verified_pin_gives_the_same_fetchurl_arguments(nix, tmp_path):
    """A verified pin built from a real PyPI wheel: the fetchurl arguments of the PyPI file."""
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
            "hash_source": "computed here from the PyPI download", "hash_checked": "computed", "verified": True, "reason": None,
        }}}},
    }
    path = tmp_path / "pins.json"
    validate(data, path)
    path.write_text(json.dumps(data))
    got = nix.eval(
        f'(import ./lib/pins.nix).wheel {{ pins = builtins.fromJSON (builtins.readFile {path}); file = "{path}"; }}'
        f' "{name}" "x86_64-linux" "3.12"'
    )
    assert got == {"pname": name, "version": version, "name": release.filename, "url": url, "hash": sri}


@pytest.mark.network
def test_pure_python_wheels_resolve_through_the_any_key_on_both_sides(nix, tmp_path):
    """A pure wheel is pinned once, under "any": lib.pins and the store pick it for any system and Python."""
    name, version = "packaging", "24.2"
    release = pypi.pick(pypi.release_files(name, version), "*.whl")
    url = urljoin(f"{pypi.PYPI_JSON}/{name}/json", release.url)
    data = {
        "schema_version": 1, "description": "one pure wheel, from PyPI",
        "update_command": f"blackwell-stack pins update pypi {name}=={version} --file pins.json",
        "packages": {name: {"version": version, "wheels": {"any": {
            "filename": release.filename, "url": url, "hash": hex_to_sri(release.sha256),
            "hash_source": "PyPI's registry sha256", "hash_checked": "registry", "verified": True, "reason": None}}}},
    }
    path = tmp_path / "pins.json"
    validate(data, path)
    path.write_text(json.dumps(data))
    for system, python in [("x86_64-linux", "3.12"), ("aarch64-linux", "3.13")]:
        got = nix.eval(f'(import ./lib/pins.nix).wheel {{ pins = builtins.fromJSON (builtins.readFile {path}); '
                       f'file = "{path}"; }} "{name}" "{system}" "{python}"')
        assert got == {"pname": name, "version": version, "name": release.filename, "url": url,
                       "hash": hex_to_sri(release.sha256)}
        assert got["name"].endswith("-py3-none-any.whl")
