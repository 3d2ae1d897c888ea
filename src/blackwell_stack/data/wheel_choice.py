"""Which file of a locked package each realization installs on linux x86_64, CPython 3.12.

A lock names every file of a release; each installer picks one:

- uv2nix (pyproject.nix's `pypa.selectWheels`) keeps the compatible wheels,
  orders them by their best Python tag (cp312 > cp310 > py3 > none) and takes
  the first; ties keep the lock's order (Nix's sort is stable).
- uv ranks the compatible wheels by the host's tag priority: the most
  specific Python/ABI tag first (cp312-cp312 before cp312-abi3 before
  py3-none) and, for the same Python/ABI, the newest manylinux glibc the
  host supports.

They agree except where a release ships several wheels for the same Python
tag and different platform tags (e.g. manylinux2014 and manylinux_2_34 builds
of cryptography): uv2nix takes the first in the lock, uv the newest the host's
glibc allows. `divergent` lists those; docs/stacks.md says what it means.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from urllib.parse import unquote

from packaging import tags
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from blackwell_stack.data.lock import LockedPackage

_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


@dataclass(frozen=True)
class Target:
    """The platform a stack is realized on (x86_64-linux, CPython 3.12, glibc)."""

    machine: str = "x86_64"
    python: tuple[int, int] = (3, 12)
    glibc: tuple[int, int] = (2, 40)


def filename(wheel: dict) -> str:
    """The wheel's file name, from its URL or local path in the lock."""
    ref = wheel.get("url") or wheel.get("path") or wheel.get("filename") or ""
    return unquote(ref.rsplit("/", 1)[-1])


def _tags(name: str) -> frozenset[Tag]:
    try:
        return parse_wheel_filename(name)[3]
    except InvalidWheelFilename:
        return frozenset()


def _language_rank(tag: Tag) -> int:
    """pyproject.nix's bestLanguageTag: the Python tag's version digits as a number ("cp312" 312, "py3" 3)."""
    m = re.fullmatch(r"(?:cp|py)(\d+)", tag.interpreter)
    return int(m.group(1)) if m else 0


def uv2nix_choice(package: LockedPackage, target: Target = Target()) -> dict | None:
    """The wheel uv2nix builds (pyproject.nix `selectWheels`: the best language tag, the first of equals)."""
    best, choice = -1, None
    for wheel in package.wheels:
        ranks = [_language_rank(t) for t in _tags(filename(wheel)) if t in host_tags(target)]
        if ranks and max(ranks) > best:
            best, choice = max(ranks), wheel
    return choice


def _platforms(target: Target) -> list[str]:
    """A glibc host's platform tags, most specific first (as packaging.tags and uv list them)."""
    out = []
    major, minor = target.glibc
    for m in range(minor, 4, -1):
        out.append(f"manylinux_{major}_{m}_{target.machine}")
        out += [f"{legacy}_{target.machine}" for legacy, v in _LEGACY.items() if v == (major, m)]
    return [*out, f"linux_{target.machine}"]


@functools.lru_cache(maxsize=8)
def host_tags(target: Target) -> dict[Tag, int]:
    """Every tag a CPython host of `target` accepts, with its priority (0 is best)."""
    platforms = _platforms(target)
    ordered = [*tags.cpython_tags(target.python, platforms=platforms),
               *tags.compatible_tags(target.python, f"cp{target.python[0]}{target.python[1]}", platforms)]
    ranks: dict[Tag, int] = {}
    for rank, tag in enumerate(ordered):
        ranks.setdefault(tag, rank)
    return ranks


def uv_choice(package: LockedPackage, target: Target = Target()) -> dict | None:
    """The wheel uv installs on a host of `target`: the one with the best-ranked tag."""
    ranks = host_tags(target)
    best, choice = len(ranks), None
    for wheel in package.wheels:
        found = [ranks[t] for t in _tags(filename(wheel)) if t in ranks]
        if found and min(found) < best:
            best, choice = min(found), wheel
    return choice


def divergent(packages: list[LockedPackage], target: Target = Target()) -> dict[str, tuple[str, str]]:
    """{package: (uv2nix's file, uv's file)} where the two realizations install different files."""
    out = {}
    for pkg in packages:
        a, b = uv2nix_choice(pkg, target), uv_choice(pkg, target)
        if a is not None and b is not None and filename(a) != filename(b):
            out[pkg.name] = (filename(a), filename(b))
    return out
