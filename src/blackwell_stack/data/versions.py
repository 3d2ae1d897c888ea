"""Versions and the rules' version conditions: PEP 440, as packaging reads them.

Versions are PEP 440 public versions in the form pip and uv write them
(`0.5.23`, `0.7.0rc1`, `0.6.5.post1`, `2.12.0.dev20260307+cu130`, `1!2.0`).
Anything else (`v0.5.9`, `0.5.9-rc1`, upper case), which packaging would
normalise, is refused with a message, never guessed.

A rule's condition on a version is a PEP 440 specifier set (`==0.5.9`,
`<=0.6.6`, `>=0.6.0,<0.6.7`), matched as packaging matches it, pre-releases
included: `==0.5.23` holds for a local build `0.5.23+cu130` too (PEP 440
ignores local labels there), and `<0.6.7` not for `0.6.7rc1`.
"""

from __future__ import annotations

from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from blackwell_stack.errors import StackError


def parse(version: Any) -> Version:
    """The version, refused unless it is written in its normal form."""
    try:
        parsed = Version(version) if isinstance(version, str) else None
    except InvalidVersion:
        parsed = None
    if parsed is None or str(parsed) != version:
        raise StackError(
            f"{version!r} is not a version in PEP 440 normal form",
            "write it as pip and uv do: 0.5.23, 0.7.0rc1, 0.6.5.post1, 2.12.0.dev20260307+cu130",
        )
    return parsed


def specifiers(text: Any) -> SpecifierSet:
    """A PEP 440 specifier set, each version in it in normal form; a StackError that says how to write one."""
    hint = 'write a PEP 440 specifier set, e.g. "==0.5.9", "<=0.6.6" or ">=0.6.0,<0.6.7"'
    try:
        spec = SpecifierSet(text) if isinstance(text, str) and text.strip() else None
    except InvalidSpecifier:
        spec = None
    if spec is None:
        raise StackError(f"{text!r} is not a PEP 440 specifier set", hint)
    for one in spec:
        parse(one.version)
    return spec


def holds(version: str, spec: str) -> bool:
    return specifiers(spec).contains(parse(version), prereleases=True)


def overlap(a: str, b: str) -> str | None:
    """A version named in either specifier set that both hold for, or None (a check, not a proof: two sets
    may still share only versions neither names)."""
    named = [one.version for one in (*specifiers(a), *specifiers(b))]
    return next((v for v in named if holds(v, a) and holds(v, b)), None)


def show(specs: list[str]) -> str:
    """The sets for people: an exact release as its version alone ("0.5.9" for "==0.5.9")."""
    exact = [s[2:] if s.startswith("==") and "," not in s and "*" not in s else s for s in specs]
    return ", ".join(exact) if exact else "none"
