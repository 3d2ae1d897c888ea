"""`pins rescue`: a real wheel from PyPI installed into a real venv by uv, repacked.

The repack holds exactly the original wheel's files (same bytes, same RECORD
rows) in a new zip; a changed file and a missing file are refused, and
nothing is written.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from pathlib import Path

import pytest
from support.uv_venv import install, make_venv, uv_or_skip

from blackwell_stack.cli import main

pytestmark = pytest.mark.network

# tqdm: a console script made from entry_points.txt (left out of the repack) beside its modules.
WHEEL = ("tqdm", "4.67.1", "tqdm-4.67.1-py3-none-any.whl")


@pytest.fixture
def venv(tmp_path, pypi_file):
    uv_or_skip()
    wheel = pypi_file(*WHEEL[:2], WHEEL[2])
    env = tmp_path / "venv"
    install(make_venv(env), str(wheel))  # copies: the tests change installed files
    return env, wheel


def _site(env: Path) -> Path:
    (site,) = env.glob("lib/python3.*/site-packages")
    return site


def _record_rows(zf: zipfile.ZipFile, name: str) -> set[tuple[str, ...]]:
    return {tuple(r) for r in csv.reader(io.StringIO(zf.read(name).decode())) if r}


def test_repack_has_the_original_files_and_a_new_zip(venv, tmp_path, capsys):
    env, original = venv
    out = tmp_path / "out"
    out.mkdir()
    assert main(["pins", "rescue", "tqdm", "--from-venv", str(env), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    (repacked,) = out.glob("*.whl")
    assert repacked.name == WHEEL[2]
    with zipfile.ZipFile(original) as a, zipfile.ZipFile(repacked) as b:
        assert set(a.namelist()) == set(b.namelist())
        record = "tqdm-4.67.1.dist-info/RECORD"
        for name in a.namelist():
            if name != record:
                assert a.read(name) == b.read(name), name
        assert _record_rows(a, record) == _record_rows(b, record)
    # Same files, not the same zip: a new pin, and the output says so.
    digest = __import__("hashlib").sha256(repacked.read_bytes()).hexdigest()
    assert f"sha256 {digest}" in printed
    assert digest != __import__("hashlib").sha256(original.read_bytes()).hexdigest()
    assert "new pin, not the upstream one" in printed
    assert f"then add it to the Nix store with: blackwell-stack pins vendor {repacked}" in printed
    # A second repack of the same installation is the same bytes.
    again = tmp_path / "again"
    again.mkdir()
    assert main(["pins", "rescue", "tqdm", "--from-venv", str(env), "--out", str(again)]) == 0
    assert (again / WHEEL[2]).read_bytes() == repacked.read_bytes()


def test_a_changed_file_is_refused_and_nothing_is_written(venv, tmp_path, capsys):
    env, _ = venv
    target = _site(env) / "tqdm" / "std.py"
    target.write_text(target.read_text() + "# changed\n")
    out = tmp_path / "out"
    out.mkdir()
    assert main(["pins", "rescue", "tqdm", "--from-venv", str(env), "--out", str(out)]) == 5
    err = capsys.readouterr().err
    assert "differs from RECORD: tqdm/std.py" in err and "nothing was written" in err and "hint:" in err
    assert list(out.iterdir()) == []


def test_a_missing_file_is_refused_and_nothing_is_written(venv, tmp_path, capsys):
    env, _ = venv
    (_site(env) / "tqdm" / "cli.py").unlink()
    out = tmp_path / "out"
    out.mkdir()
    assert main(["pins", "rescue", "tqdm", "--from-venv", str(env), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "missing: tqdm/cli.py" in err and "nothing was written" in err
    assert list(out.iterdir()) == []


def test_a_distribution_that_is_not_installed_is_named(venv, tmp_path, capsys):
    env, _ = venv
    assert main(["pins", "rescue", "torch", "--from-venv", str(env), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "torch is not installed in" in err and "hint:" in err
    assert "Traceback" not in err


def test_a_record_row_that_climbs_out_of_the_venv_is_refused(venv, tmp_path, capsys):
    """A RECORD row is a peer's path: `escape/../…/secret.txt` once packed a file from outside the venv."""
    env, _ = venv
    secret = tmp_path / "secret.txt"
    secret.write_text("not the venv's\n")
    record = next(_site(env).glob("tqdm-*.dist-info")) / "RECORD"
    climb = "escape/" + "../" * (len(_site(env).relative_to(tmp_path).parts) + 1) + "secret.txt"
    digest = base64.urlsafe_b64encode(hashlib.sha256(secret.read_bytes()).digest()).rstrip(b"=").decode()
    record.write_text(record.read_text() + f"{climb},sha256={digest},{secret.stat().st_size}\n")
    out = tmp_path / "out"
    out.mkdir()
    assert main(["pins", "rescue", "tqdm", "--from-venv", str(env), "--out", str(out)]) == 2
    assert f"RECORD names {climb}, outside the venv" in capsys.readouterr().err
    assert list(out.iterdir()) == []


def test_a_wheel_member_that_climbs_is_refused_by_every_reader(tmp_path, capsys):
    """inspect and wheel diff open wheels through one opener, which refuses a member `../../x`."""
    wheel = tmp_path / "evil-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("evil-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr("evil-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")
        zf.writestr("evil/../../outside.txt", "x")
        zf.writestr("evil-1.0.dist-info/RECORD", "")
    other = tmp_path / "evil-1.1-py3-none-any.whl"
    other.write_bytes(wheel.read_bytes() + b"\0")  # another file, so that wheel diff opens both
    for argv in (["inspect", str(wheel)], ["wheel", "diff", str(wheel), str(other)]):
        assert main(argv) == 2, argv
        assert "member 'evil/../../outside.txt' climbs out of the archive" in capsys.readouterr().err
