"""`pins vendor FILE`: check a kept wheel against its pin (or a stack's lock) and add it to the Nix store.

The store path is exactly the fixed-output path that the flake's fetchurl
(flat sha256, name = the file name) computes, so Nix finds the file there
instead of downloading it: a nightly that vanished from the index still
builds bit for bit. A file that a stack's uv.lock names (by file name) is
checked against the lock's sha256, which is what the stack's Nix set fetches
it by (nix/fixups/kept-wheels.nix, nix/fixups/wheel-choice.nix, uv2nix).

A pin with a hash accepts only the file with that hash. A pin without one
(`--record`) has nothing to compare with, so the file must prove itself:
a readable wheel whose METADATA names the pinned package and version, and
whose RECORD agrees with every file inside it (check_record_candidate).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from blackwell_stack import inputfiles, proc
from blackwell_stack.data import lock as lockfile
from blackwell_stack.data import wheel_choice as wheels
from blackwell_stack.data.pins import PinsFile, load_pins
from blackwell_stack.data.stack import load_lock
from blackwell_stack.errors import HashMismatch, StackError
from blackwell_stack.formats import wheelrecord, wheelzip
from blackwell_stack.hashes import hex_to_sri, sha256_file, sri_to_hex
from blackwell_stack.progress import Progress

NIX_HINT = "install Nix (https://nixos.org/download, or Debian/Ubuntu's nix-bin package)"


@dataclass
class VendorResult:
    store_path: str
    pins_file: str
    package: str
    key: str
    recorded: bool


def find_pin(pins_files: list[PinsFile], filename: str, digest: str):
    """(pins, package, key, entry) whose file name, or else hash, matches."""
    by_name, by_hash = [], []
    sri = hex_to_sri(digest)
    for pins in pins_files:
        for package, pkg in pins.packages.items():
            for key, entry in pkg["wheels"].items():
                if entry["filename"] == filename:
                    by_name.append((pins, package, key, entry))
                elif entry["hash"] == sri:
                    by_hash.append((pins, package, key, entry))
    hits = by_name or by_hash
    if not hits:
        known = sorted({e["filename"] for p in pins_files for pkg in p.packages.values() for e in pkg["wheels"].values() if e["filename"]})
        raise StackError(
            f"{filename} (sha256 {digest}) matches no pin",
            "vendor a file that a pins file names; pinned files: " + (", ".join(known) or "none"),
        )
    return hits[0]


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def check_record_candidate(file: Path, package: str, version: str | None) -> None:
    """Refuse, with HashMismatch, a file that is not a sound wheel of `package` at `version`.

    A sound wheel: a zip with a .dist-info/WHEEL, METADATA whose Name and
    Version are the pin's, and a RECORD that lists every file inside with the
    sha256 and size it has.
    """
    hint = "this is not the pinned wheel; nothing was added to the store and the pin is unchanged"
    try:
        with wheelzip.open_zip(file) as zf:
            name, meta_version = wheelrecord.metadata(zf, file)
    except StackError as exc:
        raise HashMismatch(f"{file} is not a wheel: {exc.message}", hint) from None
    if canonicalize_name(name) != canonicalize_name(package):
        raise HashMismatch(f"{file} is a wheel of {name}, not of {package}", hint)
    if version is not None and not _same_version(meta_version, version):
        raise HashMismatch(f"{file} is {name} {meta_version}, but the pin is {package} {version}", hint)
    try:
        with Progress(f"checking {file.name}", wheelrecord.total_bytes(file)) as bar:
            record = wheelrecord.check(file, progress=bar.advance)
    except StackError as exc:
        raise HashMismatch(f"{file}: {exc.message}", hint) from None
    if not record.ok:
        problems = record.problems()
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise HashMismatch(f"{file}: its RECORD disagrees with its files: {'; '.join(problems[:3])}{more}", hint)


def fixed_path(name: str, digest: str) -> str:
    """The store path of a flat sha256 fixed-output file, as Nix computes it."""
    nix_store = proc.require("nix-store", NIX_HINT)
    return proc.run([nix_store, "--print-fixed-path", "sha256", digest, name]).stdout.strip()


def add_to_store(path: Path, name: str) -> str:
    """Add `path` to the Nix store under `name` (flat, sha256); return the store path."""
    nix_store = proc.require("nix-store", NIX_HINT)
    with tempfile.TemporaryDirectory(prefix="blackwell-vendor-") as tmp:
        named = Path(tmp) / name
        try:
            os.link(path, named)
        except OSError:
            shutil.copyfile(path, named)
        return proc.run([nix_store, "--add-fixed", "sha256", str(named)]).stdout.strip()


def add_at_fixed_path(path: Path, name: str, digest: str) -> str:
    """Add `path` to the store as `name`; refuse unless it lands where the flake's fetchurl looks for it."""
    expected = fixed_path(name, digest)
    store_path = add_to_store(path, name)
    if store_path != expected:
        raise StackError(f"nix-store added {store_path}, but fetchurl would look for {expected}",
                         "use the nix-store of the Nix that builds the flake")
    return store_path


def find_locked(lock_paths: list[Path], filename: str) -> tuple[Path, str, str] | None:
    """(lock, package, hex sha256) of the file a uv.lock names by this file name, or None."""
    for path in lock_paths:
        lock = load_lock(Path(path))
        for pkg in lock.packages.values():
            for wheel in pkg.wheels:
                digest = lockfile.sha256_of(wheel)
                if wheels.filename(wheel) == filename and digest:
                    return Path(path), pkg.name, digest
    return None


def vendor(file: Path, pins_paths: list[Path], *, record: bool = False, locks: list[Path] | None = None) -> VendorResult:
    inputfiles.regular_file(file, hint="pass the path of the wheel you kept")
    filename = urllib.parse.unquote(file.name)
    missing = [str(p) for p in pins_paths if not Path(p).is_file()]
    if missing:
        raise StackError(f"no such pins file: {', '.join(missing)}", "pass --file an existing pins.json, or leave --file out to match every pins file")
    digest = sha256_file(file)
    locked = find_locked(locks or [], filename)
    if locked is not None:
        lock_path, package, pinned = locked
        if pinned != digest:
            raise HashMismatch(f"{file}: sha256 {digest} differs from {lock_path}'s {pinned} for {package}",
                               "this is not the locked file; nothing was added to the store")
        store_path = add_at_fixed_path(file, filename, digest)
        return VendorResult(store_path, str(lock_path), package, "uv.lock", False)
    pins_files = [load_pins(p) for p in pins_paths]
    pins, package, key, entry = find_pin(pins_files, filename, digest)
    name = entry["filename"] or filename
    recorded = False
    if entry["hash"]:
        pinned = sri_to_hex(entry["hash"])
        if pinned != digest:
            raise HashMismatch(
                f"{file}: sha256 {digest} differs from the pin of {package} ({key}) in {pins.path}: {pinned}",
                "this is not the pinned file; nothing was added to the store",
            )
    elif not record:
        raise StackError(
            f"the pin of {package} ({key}) in {pins.path} has no hash yet, so {file} cannot be checked",
            f"run `{pins.update_command}`, or pass --record to pin this file's own hash",
        )
    else:
        check_record_candidate(file, package, pins.packages[package].get("version"))
        recorded = True

    store_path = add_at_fixed_path(file, name, digest)

    if recorded:
        entry.update(
            {
                "filename": name,
                "hash": hex_to_sri(digest),
                "hash_source": f"computed by `blackwell-stack pins vendor` from a local copy ({filename}) on {dt.date.today().isoformat()}, "
                "a wheel whose METADATA names this package and version and whose RECORD matches its files; not checked against the index",
                "hash_checked": "computed",
                "verified": True,
                "reason": None,
            }
        )
        if not entry.get("url"):
            raise StackError(f"the pin of {package} ({key}) has no URL", f"run `{pins.update_command}` instead")
        pins.save()
    return VendorResult(store_path, str(pins.path), package, key, recorded)
