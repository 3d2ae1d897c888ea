"""`pins vendor FILE`: check a kept wheel against the stack's lock that names it and add it to the Nix store.

The store path is exactly the fixed-output path that the flake's fetchurl
(flat sha256, name = the file name) computes, so Nix finds the file there
instead of downloading it: a nightly that vanished from the index still
builds bit for bit. The file is checked against the sha256 of the uv.lock
that names it (by file name), which is what the stack's Nix set fetches it by
(nix/fixups/kept-wheels.nix, nix/fixups/wheel-choice.nix, uv2nix).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from blackwell_stack import inputfiles, proc
from blackwell_stack.data import lock as lockfile
from blackwell_stack.data import wheel_choice as wheels
from blackwell_stack.data.stack import load_lock
from blackwell_stack.errors import HashMismatch, StackError
from blackwell_stack.hashes import sha256_file

NIX_HINT = "install Nix (https://nixos.org/download, or Debian/Ubuntu's nix-bin package)"


@dataclass
class VendorResult:
    store_path: str
    lock: str
    package: str


def add_at_fixed_path(path: Path, name: str, digest: str) -> str:
    """Add `path` to the store as `name` (flat, sha256); refuse unless it lands where the flake's fetchurl looks for
    it (the fixed-output path Nix computes for that name and hash)."""
    nix_store = proc.require("nix-store", NIX_HINT)
    expected = proc.run([nix_store, "--print-fixed-path", "sha256", digest, name]).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="blackwell-vendor-") as tmp:
        named = Path(tmp) / name
        try:
            os.link(path, named)
        except OSError:
            shutil.copyfile(path, named)
        store_path = proc.run([nix_store, "--add-fixed", "sha256", str(named)]).stdout.strip()
    if store_path != expected:
        raise StackError(f"nix-store added {store_path}, but fetchurl would look for {expected}",
                         "use the nix-store of the Nix that builds the flake")
    return store_path


def vendor(file: Path, locks: list[Path]) -> VendorResult:
    inputfiles.regular_file(file, hint="pass the path of the wheel you kept")
    filename = urllib.parse.unquote(file.name)
    # (lock, package, hex sha256) of the first file a uv.lock names by this file name, with its hash
    locked = next(((path, pkg.name, lockfile.sha256_of(wheel)) for path in locks
                   for pkg in load_lock(path).packages.values() for wheel in pkg.wheels
                   if wheels.filename(wheel) == filename and lockfile.sha256_of(wheel)), None)
    if locked is None:
        raise StackError(f"no stack's uv.lock names {filename}",
                         "lock the stack against the directory that holds it first: "
                         "blackwell-stack stack lock NAME --wheels DIR (docs/stacks.md)")
    lock_path, package, pinned = locked
    digest = sha256_file(file)
    if pinned != digest:
        raise HashMismatch(f"{file}: sha256 {digest} differs from {lock_path}'s {pinned} for {package}",
                           "this is not the locked file; nothing was added to the store")
    return VendorResult(add_at_fixed_path(file, filename, digest), str(lock_path), package)
