"""sgl-kernel's source pins (pkgs/sgl-kernel/sources.json).

Read and checked (errors name the file, entry and field), the same views as lib/kernel-sources.nix (which
FetchContent dependencies a build configures, the CMake variable each is passed as, which pins are not verified),
and `update`: the one command that fills pins, by prefetching each source the way fetchFromGitHub / fetchzip unpack
it (`nix-prefetch-url --unpack`) on a machine that reaches github.com. Wired as `blackwell-stack pins update
kernel-sources` by the pins area.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack import proc
from blackwell_stack.data import registry
from blackwell_stack.errors import DataError, StackError
from blackwell_stack.fileio import atomic_write_json
from blackwell_stack.hashes import hex_to_sri
from blackwell_stack.kernel.inputs import nar
from blackwell_stack.kernel.inputs.source_filter import Filter

UPDATE_COMMAND = "blackwell-stack pins update kernel-sources"
UPDATE_FETCH_HINT = "blackwell-stack kernel sources fetch --dir DIR fetches and checks them"
GITHUB = "https://github.com"
_NIX_BASE32 = "0123456789abcdfghijklmnpqrsvwxyz"


def sources_path() -> Path:
    return registry.path("kernel-sources")


@dataclass(frozen=True)
class Pin:
    """One pinned source: `where` is its id ("sglang", "fetchcontent.<name>",
    "fetchcontent.<name>.submodules.<path>"), `relpath` its directory under a
    sources directory, `entry` the JSON object itself."""

    where: str
    relpath: str
    entry: dict[str, Any]

    @property
    def verified(self) -> bool:
        return bool(self.entry.get("verified")) and self.entry.get("hash") is not None

    @property
    def expected(self) -> str | None:
        return self.entry["hash"] if self.verified else None

    @property
    def filter(self) -> Filter | None:
        """What of the tree the pin covers (None: all of it)."""
        return Filter.of(self.entry)

    def hash_of(self, path: Path) -> str:
        """The NAR hash of the tree at path, of the part the pin's filter selects."""
        selected = self.filter
        return nar.nar_hash_sri(path, selected.selects if selected else None)

    def archive_url(self, github: str = GITHUB) -> str:
        """What fetchFromGitHub (GitHub's tarball of rev) or fetchzip (url) downloads, from `github` (a mirror of
        github.com) for either: a fetchzip URL on github.com (a release download) is read from the mirror too."""
        e = self.entry
        if e.get("fetcher") != "fetchzip":
            return f"{github.rstrip('/')}/{e['owner']}/{e['repo']}/archive/{e['rev']}.tar.gz"
        return github.rstrip("/") + e["url"][len(GITHUB):] if e["url"].startswith(GITHUB + "/") else e["url"]


def load(path: Path | None = None) -> dict[str, Any]:
    """sources.json, checked; DataError names the entry and field that is wrong."""
    path = Path(path) if path is not None else sources_path()
    return registry.load("kernel-sources", file=path, check=_check_pins)


def _check_pins(data: dict[str, Any], path: Path) -> None:
    """What a verified or an unverified pin must say (the file's shape is the registry's: data/schemas.py)."""
    for pin in pins(data):
        e = pin.entry
        if e["verified"] and (e["hash"] is None or not e["hash_source"]):
            raise DataError(path, pin.where, "verified", "verified without a hash and its source",
                            f"set verified to false with a reason, or run {UPDATE_COMMAND}")
        if not e["verified"] and not e["reason"]:
            raise DataError(path, pin.where, "reason", "an unverified pin must say why", "add a reason")
        spec = e.get("filter")
        if spec is not None and ("keep" in spec) == ("drop" in spec):
            raise DataError(path, pin.where, "filter", "must keep a list of paths or drop one, not both or neither",
                            'write {"keep": [...]} or {"drop": [...]}, with "why"')


def pins(data: dict[str, Any], names: Iterable[str] | None = None, with_sglang: bool = True) -> Iterator[Pin]:
    """The pins of sglang and of the FetchContent sources `names` (None: all), each followed by its submodules'."""
    if with_sglang:
        yield Pin("sglang", "sglang", data["sglang"])
    for name in sorted(data["fetchcontent"] if names is None else names):
        entry = data["fetchcontent"][name]
        yield Pin(f"fetchcontent.{name}", name, entry)
        for sub in sorted(entry.get("submodules") or {}):
            yield Pin(f"fetchcontent.{name}.submodules.{sub}", f"{name}.submodules/{sub}", entry["submodules"][sub])


def fetchcontent_variable(name: str) -> str:
    """FetchContent reads FETCHCONTENT_SOURCE_DIR_<string(TOUPPER name)>."""
    return f"FETCHCONTENT_SOURCE_DIR_{name.upper()}"


FULLY_DISCONNECTED = "FETCHCONTENT_FULLY_DISCONNECTED"


def fetchcontent_settings(data: dict[str, Any], cuda_archs: Iterable[str], dirs: Mapping[str, str]) -> dict[str, str]:
    """The FetchContent cache settings of a build for cuda_archs, given where each dependency lies.

    Every dependency the build configures points at its directory (FETCHCONTENT_SOURCE_DIR_<NAME>), and
    FETCHCONTENT_FULLY_DISCONNECTED=ON keeps CMake from downloading or updating anything (CMake's FetchContent
    documentation). lib/kernel-sources.nix fetchContentSettings is the same function for the Nix derivation; tests
    compare the two.
    """
    settings = {FULLY_DISCONNECTED: "ON"}
    settings.update({fetchcontent_variable(name): str(dirs[name]) for name in _names_with_dirs(data, cuda_archs, dirs)})
    return settings


def prefix_maps(data: dict[str, Any], cuda_archs: Iterable[str], dirs: Mapping[str, str]) -> list[str]:
    """-ffile-prefix-map flags that write each dependency's directory as its FetchContent name
    (in __FILE__ and debug paths), in neededNames order; lib/kernel-sources.nix prefixMaps is the same."""
    return [f"-ffile-prefix-map={dirs[name]}={name}" for name in _names_with_dirs(data, cuda_archs, dirs)]


def _names_with_dirs(data: dict[str, Any], cuda_archs: Iterable[str], dirs: Mapping[str, str]) -> list[str]:
    names = needed_names(data, cuda_archs)
    missing = [name for name in names if name not in dirs]
    if missing:
        raise StackError(f"no source directory for {', '.join(missing)}",
                         f"put each under the --sources directory ({UPDATE_FETCH_HINT})")
    return names


def writable(entry: Mapping[str, Any]) -> bool:
    """Whether the build needs its own writable copy of a dependency: CMake edits it in place, or its git
    submodules are put inside it (lib/kernel-sources.nix `dependency`'s `writable`; tests compare the two)."""
    return bool(entry.get("writable")) or bool(entry.get("submodules"))


def needed_names(data: dict[str, Any], cuda_archs: Iterable[str]) -> list[str]:
    """FetchContent names a build for cuda_archs configures ([] = upstream's list: all)."""
    archs = list(cuda_archs)
    return [name for name, entry in sorted(data["fetchcontent"].items()) if entry.get("needed_for_archs") is None
            or not archs or any(a in entry["needed_for_archs"] for a in archs)]


def nix32_to_sri(nix32: str) -> str:
    """`nix-prefetch-url`'s base32 sha256 as an SRI string."""
    nix32 = nix32.strip()
    if len(nix32) != 52 or any(c not in _NIX_BASE32 for c in nix32):
        raise StackError(f"not a nix base32 sha256: {nix32!r}")
    # Nix writes the digest as one little-endian number, its most significant base-32 digit first.
    value = 0
    for char in nix32:
        value = value * 32 + _NIX_BASE32.index(char)
    if value >> 256:
        raise StackError(f"not a nix base32 sha256 (overflow): {nix32!r}")
    return hex_to_sri(value.to_bytes(32, "little").hex())


def prefetch(url: str) -> str:
    """The NAR hash (SRI) of url unpacked, as fetchzip/fetchFromGitHub compute it."""
    binary = proc.require("nix-prefetch-url", "install Nix (https://nixos.org/download) to prefetch sources")
    result = proc.run([binary, "--unpack", "--type", "sha256", url], timeout=3600)
    return nix32_to_sri(result.stdout.strip().splitlines()[-1])


def update(path: Path | None = None, *, refresh: bool = False, only: Iterable[str] | None = None,
           github: str = GITHUB) -> list[tuple[str, str]]:
    """Fill unverified pins (every pin with refresh=True, or those named in `only`) by prefetching them; writes
    sources.json atomically once all succeeded. Returns [(id, hash)] of the pins it set."""
    path = Path(path) if path is not None else sources_path()
    data = load(path)
    wanted = set(only) if only is not None else None
    known = {pin.where for pin in pins(data)}
    if wanted is not None and wanted - known:
        raise StackError(f"no such pin in {path}: {', '.join(sorted(wanted - known))}",
                         f"pins are: {', '.join(sorted(known))}")
    day = datetime.date.today().isoformat()
    done = []
    for pin in pins(data):
        if pin.where in wanted if wanted is not None else (refresh or not pin.verified):
            url = pin.archive_url(github)
            sri = prefetch(url)
            pin.entry.update(hash=sri, hash_checked="computed", verified=True, reason=None,
                             hash_source=f"computed with `nix-prefetch-url --unpack {url}` ({UPDATE_COMMAND}, {day})")
            done.append((pin.where, sri))
    if done:
        atomic_write_json(path, data)
    return done
