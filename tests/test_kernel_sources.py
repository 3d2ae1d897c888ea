"""blackwell_stack.kernel.inputs.sources: the Python view of pkgs/sgl-kernel/sources.json
agrees with lib/kernel-sources.nix (real nix) on the same JSON, bad data is named,
and `update` fills a pin with the hash real nix-prefetch-url computes for a real
tarball (served from a file:// mirror laid out like github.com/<o>/<r>/archive/)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile

import pytest
from support import REPO

from blackwell_stack.errors import DataError, StackError
from blackwell_stack.kernel.inputs import sources

SOURCES = REPO / "pkgs" / "sgl-kernel" / "sources.json"


def nix_view(nix, data: dict, archs: list[str]):
    return nix.eval(
        "let k = (import ./lib).kernelSources;"
        f" s = builtins.fromJSON {json.dumps(json.dumps(data))};"
        f" archs = builtins.fromJSON {json.dumps(json.dumps(archs))};"
        " in { needed = k.neededNames s archs; unverified = k.unverified s;"
        " variables = map k.cmakeVariable (builtins.attrNames s.fetchcontent); }"
    )


@pytest.mark.proc
@pytest.mark.parametrize("archs", [[], ["12.0a"], ["9.0a", "12.0a"], ["10.3a"]])
def test_python_and_nix_agree(nix, archs):
    data = sources.load(SOURCES)
    data["fetchcontent"]["repo-fmt"].update(verified=False, hash=None, reason="test")
    got = nix_view(nix, data, archs)
    assert got["needed"] == sources.needed_names(data, archs)
    assert got["unverified"] == [p.where for p in sources.pins(data) if not p.verified] == ["fetchcontent.repo-fmt"]
    assert got["variables"] == [sources.fetchcontent_variable(n) for n in sorted(data["fetchcontent"])]


def test_the_committed_file_loads_and_is_what_update_would_write():
    text = SOURCES.read_text()
    data = sources.load(SOURCES)
    assert text == json.dumps(data, indent=2) + "\n"
    assert data["update_command"] == sources.UPDATE_COMMAND


@pytest.mark.parametrize(
    ("mutate", "entry", "field"),
    [
        (lambda d: d["fetchcontent"]["repo-fmt"].pop("rev"), "fetchcontent.repo-fmt", "rev"),
        (lambda d: d["fetchcontent"]["repo-fmt"].update(rev="master"), "fetchcontent.repo-fmt", "rev"),
        (lambda d: d["sglang"].update(hash="sha256-AAAA"), "sglang", "hash"),
        (lambda d: d["fetchcontent"]["json"].update(verified=False, hash=None, reason=None), "fetchcontent.json", "reason"),
        (lambda d: d["fetchcontent"]["repo-triton"].update(hash=None), "fetchcontent.repo-triton", "verified"),
        (lambda d: d["fetchcontent"]["repo-fmt"].update(fetcher="git"), "fetchcontent.repo-fmt", "fetcher"),
        (lambda d: d["fetchcontent"]["repo-fmt"].update(hash_checked="by hand"), "fetchcontent.repo-fmt", "hash_checked"),
    ],
)
def test_bad_data_names_entry_and_field(tmp_path, mutate, entry, field):
    data = json.loads(SOURCES.read_text())
    mutate(data)
    path = tmp_path / "sources.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError) as excinfo:
        sources.load(path)
    message = str(excinfo.value)
    assert entry in message and field in message and str(path) in message


@pytest.mark.proc
def test_nix32_matches_real_nix(tmp_path):
    binary = shutil.which("nix")
    if binary is None:
        pytest.skip("nix is not installed")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("blackwell\n")
    hash_path = [binary, "--extra-experimental-features", "nix-command", "hash", "path"]
    b32 = subprocess.run(hash_path + ["--base32", str(tmp_path / "d")], capture_output=True, text=True, check=True)
    sri = subprocess.run(hash_path + [str(tmp_path / "d")], capture_output=True, text=True, check=True)
    assert sources.nix32_to_sri(b32.stdout) == sri.stdout.strip()
    with pytest.raises(StackError):
        sources.nix32_to_sri("e" * 51)


@pytest.mark.proc
def test_update_fills_an_unverified_pin_with_the_real_prefetched_hash(tmp_path):
    if shutil.which("nix-prefetch-url") is None or shutil.which("nix") is None:
        pytest.skip("nix-prefetch-url is not installed (apt-get install nix-bin)")
    # A tarball laid out as GitHub serves it: one top directory.
    tree = tmp_path / "tree" / "fmt-553ec11"
    (tree / "include" / "fmt").mkdir(parents=True)
    (tree / "include" / "fmt" / "core.h").write_text("#pragma once\n")
    (tree / "README.md").write_text("fmt\n")
    rev = "553ec11ec06fbe0beebfbb45f9dc3c9eabd83d28"
    archive = tmp_path / "mirror" / "fmtlib" / "fmt" / "archive" / f"{rev}.tar.gz"
    archive.parent.mkdir(parents=True)
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname=tree.name)
    expected = subprocess.run(
        ["nix", "--extra-experimental-features", "nix-command", "hash", "path", str(tree)],
        capture_output=True, text=True, check=True,
    ).stdout.strip()

    data = json.loads(SOURCES.read_text())
    data["fetchcontent"]["repo-fmt"].update(hash=None, verified=False, reason="not hashed yet")
    path = tmp_path / "sources.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    try:
        done = sources.update(path, github=f"file://{tmp_path / 'mirror'}")
    except StackError as exc:  # e.g. no writable Nix store for nix-prefetch-url
        pytest.skip(f"nix-prefetch-url cannot run here: {exc}")
    assert done == [("fetchcontent.repo-fmt", expected)]
    entry = sources.load(path)["fetchcontent"]["repo-fmt"]
    assert entry["hash"] == expected and entry["verified"] is True and entry["reason"] is None
    assert "nix-prefetch-url --unpack" in entry["hash_source"] and entry["hash_checked"] == "computed"
    # nothing left unverified: a second run prefetches nothing and leaves the file as it is
    before = path.read_text()
    assert sources.update(path, github=f"file://{tmp_path / 'mirror'}") == []
    assert path.read_text() == before


def test_update_names_unknown_pins(tmp_path):
    path = tmp_path / "sources.json"
    path.write_text(SOURCES.read_text())
    with pytest.raises(StackError, match=r"no such pin .*fetchcontent.repo-nope"):
        sources.update(path, only=["fetchcontent.repo-nope"])
