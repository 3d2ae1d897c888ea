"""Version order and version ranges for the rules, exactly as lib/versions.nix computes them.

Versions are PEP 440 public versions in the form pip and uv write them
(`0.5.23`, `0.7.0rc1`, `0.6.5.post1`, `2.12.0.dev20260307+cu130`, `1!2.0`),
ordered as packaging.version orders them: release numbers compared with
trailing zeros ignored; a dev release before the pre-releases before the
release before its post releases; a local label after the public version.
Nix has no such order (builtins.compareVersions puts `1.0` before `1.0rc1`),
so both sides implement this one and the tests check them against each other
and against packaging. Anything else (`v0.5.9`, `0.5.9-rc1`, upper case) is
refused with a message, never guessed.

A range is {"min": V} (inclusive), {"max": V} (inclusive), {"below": V}
(exclusive), or min with one of the other two. {"min": "0.5.23", "max":
"0.5.23"} holds for 0.5.23 only: not for 0.5.23.post1, 0.5.23rc1 or a local
build 0.5.23+cu130, which are other builds.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from blackwell_stack.errors import StackError

# The same pattern as lib/versions.nix (POSIX ERE there: capturing groups only).
PATTERN = r"(([0-9]+)!)?([0-9]+(\.[0-9]+)*)((a|b|rc)([0-9]+))?(\.post([0-9]+))?(\.dev([0-9]+))?(\+([a-z0-9]+(\.[a-z0-9]+)*))?"
_RE = re.compile(PATTERN)
# Nix integers are 64-bit: longer numbers are refused on both sides.
MAX_DIGITS = 18
RANGE_KEYS = ("min", "max", "below")
_PRE_RANK = {"a": 0, "b": 1, "rc": 2}

Key = tuple[int, list[int], list[int], list[int], list[int], list[list[Any]]]


def _int(digits: str, version: str) -> int:
    if len(digits) > MAX_DIGITS:
        raise StackError(f"version {version!r}: the number {digits} has more than {MAX_DIGITS} digits")
    return int(digits)


def parse(version: Any) -> Key:
    """The comparison key of a version: (epoch, release, pre, post, dev, local)."""
    if not isinstance(version, str) or _RE.fullmatch(version) is None:
        raise StackError(
            f"{version!r} is not a version in PEP 440 normal form",
            "write it as pip and uv do: 0.5.23, 0.7.0rc1, 0.6.5.post1, 2.12.0.dev20260307+cu130",
        )
    m = _RE.fullmatch(version)
    assert m is not None
    epoch = _int(m.group(2), version) if m.group(2) else 0
    release = [_int(p, version) for p in m.group(3).split(".")]
    pre_letter, pre_n = m.group(6), m.group(7)
    post = [_int(m.group(9), version)] if m.group(9) else [-1]
    dev = [0, _int(m.group(11), version)] if m.group(11) else [1, 0]
    if pre_letter:
        pre = [_PRE_RANK[pre_letter], _int(pre_n, version)]
    elif not m.group(9) and m.group(11):
        pre = [-1, 0]  # 1.0.dev1 sorts before 1.0a1
    else:
        pre = [3, 0]
    local: list[list[Any]] = []
    if m.group(13):
        for part in m.group(13).split("."):
            local.append([1, _int(part, version)] if part.isdigit() else [0, part])
    return epoch, release, pre, post, dev, local


def _cmp(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


def _cmp_release(a: list[int], b: list[int]) -> int:
    n = max(len(a), len(b))
    for x, y in zip(a + [0] * (n - len(a)), b + [0] * (n - len(b))):
        if x != y:
            return _cmp(x, y)
    return 0


def _cmp_list(a: list[Any], b: list[Any]) -> int:
    """Element by element (elements: ints, or [tag, value] pairs); a proper prefix is smaller."""
    for x, y in zip(a, b):
        c = _cmp_list(x, y) if isinstance(x, list) else _cmp(x, y)
        if c:
            return c
    return _cmp(len(a), len(b))


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as a sorts before, with or after b."""
    ka, kb = parse(a), parse(b)
    for c in (
        _cmp(ka[0], kb[0]),
        _cmp_release(ka[1], kb[1]),
        _cmp_list(ka[2], kb[2]),
        _cmp_list(ka[3], kb[3]),
        _cmp_list(ka[4], kb[4]),
        _cmp_list(ka[5], kb[5]),
    ):
        if c:
            return c
    return 0


def check_range(r: Any) -> str | None:
    """What is wrong with a range, or None."""
    if not isinstance(r, dict) or not r or set(r) - set(RANGE_KEYS):
        return f"a range is an object with {', '.join(RANGE_KEYS)}, got {r!r}"
    if "max" in r and "below" in r:
        return f"a range has max or below, not both: {r!r}"
    for key in RANGE_KEYS:
        if key in r:
            try:
                parse(r[key])
            except StackError as exc:
                return exc.message
    return None


def in_range(version: str, r: dict[str, str]) -> bool:
    return (
        ("min" not in r or compare(version, r["min"]) >= 0)
        and ("max" not in r or compare(version, r["max"]) <= 0)
        and ("below" not in r or compare(version, r["below"]) < 0)
    )


def show_range(r: dict[str, str]) -> str:
    """0.5.9 | 0.5.9..0.5.23 | >=0.6.7 | <0.6.7 | <=0.5.9 | >=0.6.0,<0.6.7"""
    if "min" in r and "max" in r:
        return r["min"] if r["min"] == r["max"] else f"{r['min']}..{r['max']}"
    parts = []
    if "min" in r:
        parts.append(f">={r['min']}")
    if "max" in r:
        parts.append(f"<={r['max']}")
    if "below" in r:
        parts.append(f"<{r['below']}")
    return ",".join(parts)


def show_ranges(ranges: list[dict[str, str]]) -> str:
    return ", ".join(show_range(r) for r in ranges) if ranges else "none"


def overlap(a: dict[str, str], b: dict[str, str]) -> bool:
    """Whether some version lies in both ranges (the order is dense: a range with a lower below its upper bound is not empty)."""
    lows = [r["min"] for r in (a, b) if "min" in r]
    low = max(lows, key=functools.cmp_to_key(compare)) if lows else None
    # Upper bounds: (version, inclusive); the smaller wins, exclusive first on a tie.
    highs = [(r["max"], True) for r in (a, b) if "max" in r] + [(r["below"], False) for r in (a, b) if "below" in r]
    if low is None or not highs:
        return True
    for high, inclusive in highs:
        c = compare(low, high)
        if c > 0 or (c == 0 and not inclusive):
            return False
    return True
