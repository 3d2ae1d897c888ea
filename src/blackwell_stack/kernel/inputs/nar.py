"""The NAR hash of a directory tree, as `nix hash path` computes it, without Nix.

sources.json pins every source by the sha256 of its Nix archive (NAR) serialisation, the hash fetchFromGitHub and
fetchzip check. Computing the same hash here lets `kernel sources check` verify a source directory on a machine
without Nix. The format (Eelco Dolstra's thesis, section 5.2.1, and Nix's src/libutil/archive.cc): every string is
its length as a 64-bit little-endian number, the bytes, then zero padding to a multiple of 8; directories list their
entries sorted by name; a regular file records only whether it is executable (any x bit of its owner); symlinks
record their target. Tests compare it with the real `nix hash path`.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import struct
from collections.abc import Callable
from pathlib import Path

_CHUNK = 1 << 20
Select = Callable[[str], bool]  # a relative path -> whether the tree holds it (a pin's filter)


def _str(h, *strings: bytes) -> None:
    for data in strings:
        h.update(struct.pack("<Q", len(data)))
        h.update(data)
        h.update(b"\0" * (-len(data) % 8))


def _contents(h, path: bytes, size: int) -> None:
    h.update(struct.pack("<Q", size))
    done = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            done += len(chunk)
    if done != size:
        raise OSError(f"{os.fsdecode(path)} changed while it was hashed")
    h.update(b"\0" * (-size % 8))


def _node(h, path: bytes, rel: str, select: Select | None) -> None:
    st = os.lstat(path)
    _str(h, b"(", b"type")
    if stat.S_ISLNK(st.st_mode):
        _str(h, b"symlink", b"target", os.readlink(path))
    elif stat.S_ISREG(st.st_mode):
        _str(h, b"regular")
        if st.st_mode & stat.S_IXUSR:
            _str(h, b"executable", b"")
        _str(h, b"contents")
        _contents(h, path, st.st_size)
    elif stat.S_ISDIR(st.st_mode):
        _str(h, b"directory")
        for name in sorted(os.listdir(path)):
            child = f"{rel}/{os.fsdecode(name)}" if rel else os.fsdecode(name)
            if select is None or select(child):
                _str(h, b"entry", b"(", b"name", name, b"node")
                _node(h, os.path.join(path, name), child, select)
                _str(h, b")")
    else:
        raise OSError(f"{os.fsdecode(path)} is neither a file, a directory nor a symlink: a NAR cannot hold it")
    _str(h, b")")


def nar_hash_sri(path: str | Path, select: Select | None = None) -> str:
    """`nix hash path PATH`'s answer, "sha256-<base64>": the sha256 of the NAR serialisation of path (a file,
    directory or symlink); with `select`, of the tree that holds only the paths (relative, '/'-separated) it
    selects, as if the rest had been removed."""
    h = hashlib.sha256()
    _str(h, b"nix-archive-1")
    _node(h, os.fsencode(str(path)), "", select)
    return "sha256-" + base64.b64encode(h.digest()).decode()
