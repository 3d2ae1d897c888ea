"""A uv.lock, parsed once: its packages, each with the files the lock names for it.

The lock is read in one go and hashed from the same bytes, so a command that
needs both its packages and its sha256 (is wheels.json current?) opens it once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from blackwell_stack import inputfiles
from blackwell_stack.data import registry
from blackwell_stack.errors import DataError, StackError


@dataclass(frozen=True)
class LockedPackage:
    """One [[package]] of a uv.lock."""

    name: str
    version: str | None
    source: dict[str, Any]
    wheels: list[dict[str, Any]]
    sdist: dict[str, Any] | None
    dependencies: list[str]
    # The extras each dependency is asked with, and this package's own extras.
    dependency_extras: dict[str, list[str]] = field(default_factory=dict)
    optional_dependencies: dict[str, list[str]] = field(default_factory=dict)

    def artifacts(self) -> list[dict[str, Any]]:
        """Every file the lock names for this package (wheels, then the sdist)."""
        return [*self.wheels, *([self.sdist] if self.sdist else [])]


@dataclass
class Lock:
    path: Path
    data: dict[str, Any]
    sha256: str  # of the bytes parsed (wheels.json records the lock it was made from by it)
    packages: dict[str, LockedPackage] = field(default_factory=dict)

    def get(self, name: str) -> LockedPackage | None:
        return self.packages.get(canonicalize_name(name))  # how uv.lock spells names (PEP 503)

    @property
    def excludes(self) -> list[str]:
        return list(self.data.get("manifest", {}).get("excludes", []))


def load_lock(path: Path) -> Lock:
    """Parse a uv.lock (read once: its sha256 is of the same bytes); DataError naming the file for anything uv
    would not have written."""
    try:
        raw = inputfiles.read_bytes(path, limit=inputfiles.DATA_FILE_LIMIT)
    except FileNotFoundError:
        raise StackError(f"{path}: no such lock", "make it with the stack's lock command (`blackwell-stack plan stack-NAME` names it)") from None
    data = registry.parse("lock", path, raw, _check_version)
    lock = Lock(path, data, hashlib.sha256(raw).hexdigest())
    for entry in data.get("package", []):
        name = entry["name"]
        if name in lock.packages:
            raise DataError(path, name, None, "is locked more than once (forked resolution)",
                            "a stack is locked for one platform and one Python: check `environments` and requires-python")
        lock.packages[name] = LockedPackage(
            name=name,
            version=entry.get("version"),
            source=entry.get("source", {}),
            wheels=list(entry.get("wheels", [])),
            sdist=entry.get("sdist"),
            dependencies=[d["name"] for d in entry.get("dependencies", [])],
            dependency_extras={d["name"]: list(d.get("extra", [])) for d in entry.get("dependencies", [])},
            optional_dependencies={extra: [d["name"] for d in deps]
                                   for extra, deps in entry.get("optional-dependencies", {}).items()},
        )
    return lock


def _check_version(data: dict[str, Any], path: Path) -> None:
    if data.get("version") != 1:
        raise DataError(path, None, "version", f"uv lock format version 1 expected, found {data.get('version')!r}",
                        "lock with the uv named in the stack's stack.json")


def sha256_of(artifact: dict) -> str | None:
    """The hex sha256 the lock records for a file (`hash = "sha256:..."`), or None."""
    digest = artifact.get("hash") or ""
    return digest.removeprefix("sha256:") if re.fullmatch(r"sha256:[0-9a-f]{64}", digest) else None
