"""Members of PyPI wheels, read by HTTP range requests into the user cache, and placed in a tree.

A rehearsal needs a few members of some very large wheels (headers and one
library of a 420 MB cuBLAS wheel, say) and every member of others. Members
are fetched once into `cache_dir("remote-zip", <wheel sha256>)` (the cache
`doctor abi` fills, each member checked by the zip's CRC-32 as it arrives) and
placed from there by hard link, so a tree costs no second copy. Nothing placed
is ever written to in place: a file a rehearsal changes is copied first.
"""

from __future__ import annotations

import os
import shutil
import stat
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from blackwell_stack.formats.remote_zip import RemoteFile, RemoteWheel
from support.rehearsal.components import Wheel


@dataclass(frozen=True)
class Member:
    name: str  # the member's path in the wheel
    path: Path  # its cached copy
    executable: bool


def _executable(info: zipfile.ZipInfo) -> bool:
    return bool((info.external_attr >> 16) & stat.S_IXUSR)


def remote_file(wheel: Wheel) -> RemoteFile:
    return RemoteFile(wheel.filename, wheel.url, wheel.sha256, wheel.size)


def members(wheel: Wheel, keep: Callable[[str], bool]) -> list[Member]:
    """The wheel's members for which keep(name) holds, fetched into the cache (in file order: one stream)."""
    with RemoteWheel(remote_file(wheel)) as remote:
        names = sorted((n for n in remote.names if keep(n)), key=lambda n: remote.infos[n].header_offset)
        return [Member(n, remote.fetch_member(n), _executable(remote.infos[n])) for n in names]


def place(source: Path, dest: Path, *, executable: bool = False) -> None:
    """Put a cached file at dest: a hard link where the file system allows, else a copy."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists() or dest.is_symlink():
        dest.unlink()
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)
    if executable:
        # The mode belongs to the inode, shared with the cache: adding x there is harmless and idempotent.
        dest.chmod(dest.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def write_copy(dest: Path, content: str | bytes) -> None:
    """Replace a placed file with a new file holding content (never writing through a hard link into the cache)."""
    mode = dest.stat().st_mode if dest.exists() else 0o644
    dest.unlink(missing_ok=True)
    if isinstance(content, bytes):
        dest.write_bytes(content)
    else:
        dest.write_text(content)
    dest.chmod(stat.S_IMODE(mode))


def unshare(path: Path) -> None:
    """Make a placed file a copy of its own before a tool changes it in place (patchelf rewrites the inode, which a
    hard link shares with the cache)."""
    if path.stat().st_nlink > 1:
        private = path.with_name(path.name + ".unshared")
        shutil.copy2(path, private)
        os.replace(private, path)
