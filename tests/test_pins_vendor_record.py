"""`pins vendor --record` pins a file's own hash only when the file proves to be the pinned wheel.

Checked before anything touches the Nix store, so these run without Nix: the
refusals never get that far.
"""

from __future__ import annotations

import json
import shutil
import zipfile

import pytest
from support.index_server import build_wheel

from blackwell_stack.cli import main
from blackwell_stack.errors import ExitCode, HashMismatch
from blackwell_stack.pins.vendor import check_record_candidate

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

VERSION = "2.12.0.dev20260307+cu130"
FILENAME = f"torch-{VERSION}-cp312-cp312-manylinux_2_28_x86_64.whl"


def unverified_pins(tmp_path):
    data = {
        "schema_version": 1,
        "description": "test pins",
        "update_command": "blackwell-stack pins update torch --date 20260307 --cuda cu130 --python 3.12",
        "packages": {"torch": {"version": VERSION, "wheels": {"x86_64-linux-312": {
            "filename": FILENAME,
            "url": "https://download-r2.pytorch.org/whl/nightly/cu130/" + FILENAME.replace("+", "%2B"),
            "hash": None, "hash_source": None, "hash_checked": "none", "verified": False, "reason": "not downloaded yet",
        }}}},
    }
    path = tmp_path / "pins.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def kept_as(tmp_path, source, name=FILENAME):
    dest = tmp_path / "kept" / name
    dest.parent.mkdir(exist_ok=True)
    shutil.copy(source, dest)
    return dest


def rewrite_member(wheel, member, data: bytes, dest):
    """The same wheel with one member's bytes changed and its RECORD left as it was."""
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            out.writestr(info, data if info.filename == member else src.read(info))
    return dest


def vendor_record(file, pins, capsys):
    code = main(["pins", "vendor", str(file), "--file", str(pins), "--record"])
    return code, capsys.readouterr().err


def test_a_text_file_named_as_the_wheel_is_refused(tmp_path, capsys):
    pins = unverified_pins(tmp_path)
    fake = tmp_path / "kept" / FILENAME
    fake.parent.mkdir()
    fake.write_text("not a wheel\n" * 200)
    before = pins.read_text()
    code, err = vendor_record(fake, pins, capsys)
    assert code == ExitCode.HASH_MISMATCH
    assert "is not a wheel" in err and "nothing was added" in err and "Traceback" not in err
    assert pins.read_text() == before  # still unverified


def test_a_wheel_of_another_package_or_version_is_refused(tmp_path, capsys):
    pins = unverified_pins(tmp_path)
    other = kept_as(tmp_path, build_wheel(tmp_path, "triton", "3.6.0"))
    code, err = vendor_record(other, pins, capsys)
    assert code == ExitCode.HASH_MISMATCH and "a wheel of triton, not of torch" in err
    older = kept_as(tmp_path, build_wheel(tmp_path, "torch", "2.12.0.dev20260305+cu130"))
    code, err = vendor_record(older, pins, capsys)
    assert code == ExitCode.HASH_MISMATCH and "but the pin is torch 2.12.0.dev20260307+cu130" in err


def test_a_wheel_whose_record_disagrees_is_refused(tmp_path):
    good = build_wheel(tmp_path, "torch", VERSION)
    tampered = rewrite_member(good, "torch/__init__.py", b"import os\n", tmp_path / "t.whl")
    check_record_candidate(good, "torch", VERSION)  # the real one passes
    with pytest.raises(HashMismatch, match=r"RECORD disagrees with its files: torch/__init__.py: size"):
        check_record_candidate(tampered, "torch", VERSION)


def test_the_sound_wheel_passes_the_checks(tmp_path):
    # Name spelled differently in METADATA and a local version label: PEP 503 / PEP 440 equality.
    check_record_candidate(build_wheel(tmp_path, "torch", VERSION), "Torch", "2.12.0.dev20260307+cu130")
