"""Hash formats: hex sha256, SRI (`sha256-<base64>`), Nix base32, and a wheel RECORD's urlsafe base64."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from blackwell_stack.errors import StackError

_HEX_RE = re.compile(r"^[0-9a-f]{64}$")


def sha256_file(path: str | Path, chunk: int = 1 << 20, *, progress: Callable[[int], None] | None = None) -> str:
    """Hex sha256 of a file; progress(n) after each block read, when given."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
            if progress:
                progress(len(block))
    return h.hexdigest()


def hex_to_sri(hex_digest: str) -> str:
    if not _HEX_RE.match(hex_digest):
        raise StackError(f"not a sha256 hex digest: {hex_digest!r}")
    return "sha256-" + base64.b64encode(bytes.fromhex(hex_digest)).decode()


def hex_to_record(hex_digest: str) -> str:
    """A digest as a wheel's RECORD writes it: urlsafe base64 without padding (PEP 376, PEP 427)."""
    return base64.urlsafe_b64encode(bytes.fromhex(hex_digest)).rstrip(b"=").decode()
