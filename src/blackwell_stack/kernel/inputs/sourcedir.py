"""A directory of sgl-kernel's FetchContent sources, checked by hash: `kernel sources check/fetch`.

Layout (what `kernel build --sources DIR` reads): DIR/<FetchContent name>/ for each dependency of
pkgs/sgl-kernel/sources.json (repo-cutlass, json, ...), DIR/<name>.submodules/<path>/ for the git submodules a pin
lists, and, optionally, DIR/sglang/ for the sglang tree itself. Each directory is what fetchFromGitHub (GitHub's
tarball of the revision) or fetchzip unpacks, so its NAR hash is the pin's hash: `check` computes it without Nix
(kernel/inputs/nar.py). A submodule's directory in its parent is left empty, as GitHub's archive (`git archive`)
leaves it. `fetch` downloads what is missing, unpacks it beside the target, checks the hash and only then moves it
into place: a directory that is there has passed its check, and nothing half-written is left behind.

The build never changes DIR: a dependency that CMake edits in place (FlashMLA with CUDA 13) or that has submodules
is copied, with its submodules put inside, into the build's own directory first (`copies`, `make_copy`), as the Nix
derivation does.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack.download import download
from blackwell_stack.errors import HashMismatch, StackError
from blackwell_stack.kernel.inputs import nar, sources
from blackwell_stack.kernel.inputs.source_filter import Filter

OK, MISMATCH, MISSING, UNPINNED = "ok", "mismatch", "missing", "unverified pin"


@dataclass(frozen=True)
class State:
    entry: sources.Pin
    path: Path
    state: str
    actual: str | None

    def to_json(self) -> dict[str, Any]:
        return {"pin": self.entry.where, "path": str(self.path), "state": self.state,
                "expected": self.entry.expected, "actual": self.actual}


def entries(data: dict[str, Any], cuda_archs: Iterable[str], *, with_sglang: bool = False) -> list[sources.Pin]:
    """The directories a build for cuda_archs reads (no archs: every source)."""
    return list(sources.pins(data, sources.needed_names(data, cuda_archs), with_sglang))


def check(directory: str | Path, items: list[sources.Pin]) -> list[State]:
    base = Path(directory)
    out = []
    for entry in items:
        path = base / entry.relpath
        if not path.is_dir():
            out.append(State(entry, path, MISSING, None))
            continue
        actual = entry.hash_of(path)
        state = UNPINNED if entry.expected is None else OK if actual == entry.expected else MISMATCH
        out.append(State(entry, path, state, actual))
    return out


def _unpack(archive: Path, dest: Path) -> None:
    """Unpack a .tar.* or .zip into dest; a single top-level directory becomes dest itself (as fetchzip does)."""
    raw = dest.with_name(dest.name + ".unpack")
    raw.mkdir()
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(raw)  # zipfile drops absolute names and '..' itself (zipfile docs)
        else:
            with tarfile.open(archive) as tf:
                if hasattr(tarfile, "data_filter"):
                    # No absolute names, no links out of the tree, no device files (Python's tarfile docs).
                    tf.extractall(raw, filter="data")
                else:  # Python before 3.11.4 (the project needs 3.11): no filters
                    tf.extractall(raw)
        top = list(raw.iterdir())
        root = top[0] if len(top) == 1 and top[0].is_dir() and not top[0].is_symlink() else raw
        root.rename(dest)
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
        raise StackError(f"cannot unpack {archive}: {exc}", "the download is not an archive; check the URL") from None
    finally:
        shutil.rmtree(raw, ignore_errors=True)


def fetch(directory: str | Path, items: list[sources.Pin], *, github: str = sources.GITHUB,
          say: Callable[[str], None] = lambda _text: None) -> list[State]:
    """Each entry that is missing downloaded, and every one checked by its NAR hash: one already there is not
    fetched again, nor removed when it fails its check; a download that fails it is not kept (HashMismatch)."""
    base = Path(directory)
    base.mkdir(parents=True, exist_ok=True)
    out = []
    for entry in items:
        path = base / entry.relpath
        if path.is_dir():
            out.extend(check(base, [entry]))
            continue
        if entry.expected is None:
            raise StackError(
                f"the pin {entry.where} in pkgs/sgl-kernel/sources.json is not verified: nothing to check a download against",
                f"fill it in first: {sources.UPDATE_COMMAND}",
            )
        url = entry.archive_url(github)
        say(f"fetching {entry.where} from {url}")
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{path.name}-", dir=path.parent) as tmp:
            archive = Path(tmp) / "archive"
            download(url, archive, label=entry.relpath)
            unpacked = Path(tmp) / "tree"
            _unpack(archive, unpacked)
            if entry.filter:
                entry.filter.apply(unpacked)
            actual = nar.nar_hash_sri(unpacked)
            if actual != entry.expected:
                raise HashMismatch(
                    f"{url} unpacks to NAR hash {actual}, but the pin {entry.where} says {entry.expected}",
                    "nothing was kept; the upstream archive changed or the download is corrupt. "
                    "Check the source, then re-pin it on purpose if the change is expected",
                )
            unpacked.rename(path)
        out.append(State(entry, path, OK, actual))
    return out


@dataclass(frozen=True)
class Copy:
    """A dependency the build reads from its own writable copy at `dest`: `source` with each submodule
    (its path inside the copy, the checked directory it comes from) put in place."""

    name: str
    source: Path
    dest: Path
    submodules: tuple[tuple[str, Path], ...]
    filters: tuple[Filter | None, ...]  # the source's, then each submodule's

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "from": str(self.source), "to": str(self.dest),
                "submodules": {path: str(src) for path, src in self.submodules}}


def copies(directory: str | Path, data: dict[str, Any], cuda_archs: Iterable[str], root: str | Path) -> list[Copy]:
    """The copies a build for cuda_archs needs, each at root/<name> (lib/kernel-sources.nix `writable`)."""
    base = Path(directory).resolve()
    out = []
    for name in sources.needed_names(data, cuda_archs):
        entry = data["fetchcontent"][name]
        if sources.writable(entry):
            names = sorted(entry.get("submodules") or {})
            subs = tuple((sub, base / f"{name}.submodules" / sub) for sub in names)
            filters = (Filter.of(entry), *(Filter.of(entry["submodules"][sub]) for sub in names))
            out.append(Copy(name, base / name, Path(root).resolve() / name, subs, filters))
    return out


def filtered(selected: Filter | None, root: Path) -> Callable[[str, list[str]], set[str]] | None:
    """A copytree `ignore` that stages only what a pin covers: the build reads exactly the hashed tree."""
    return selected.ignore(root) if selected else None


def _make_writable(root: Path) -> None:
    """u+w on every file and directory (sources may be read-only; CMake writes into the copy)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames, ""]:
            path = os.path.join(dirpath, name) if name else dirpath
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode) and not st.st_mode & stat.S_IWUSR:
                os.chmod(path, stat.S_IMODE(st.st_mode) | stat.S_IWUSR)


def make_copy(copy: Copy) -> None:
    """A fresh copy at copy.dest (what an earlier build left there is replaced), made beside it and moved into place."""
    copy.dest.parent.mkdir(parents=True, exist_ok=True)
    partial = copy.dest.with_name(copy.dest.name + ".partial")
    try:
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(copy.source, partial, symlinks=True, ignore=filtered(copy.filters[0], copy.source))
        for (path, src), selected in zip(copy.submodules, copy.filters[1:]):
            target = partial / path
            if target.is_symlink() or target.is_file():
                target.unlink()
            elif target.is_dir():
                shutil.rmtree(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(src, target, symlinks=True, ignore=filtered(selected, src))
        _make_writable(partial)
        shutil.rmtree(copy.dest, ignore_errors=True)
        partial.rename(copy.dest)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise StackError(f"cannot copy {copy.source} to {copy.dest}: {exc}",
                         "the build copies it because CMake edits it in place; free space or pick another --build-dir") from None
