"""Version order and version ranges for the rules: packaging's PEP 440 order, on versions in normal form.

Versions are PEP 440 public versions in the form pip and uv write them
(`0.5.23`, `0.7.0rc1`, `0.6.5.post1`, `2.12.0.dev20260307+cu130`, `1!2.0`).
Anything else (`v0.5.9`, `0.5.9-rc1`, upper case), which packaging would
normalise, is refused with a message, never guessed.

A range is {"min": V} (inclusive), {"max": V} (inclusive), {"below": V}
(exclusive), or min with one of the other two. {"min": "0.5.23", "max":
"0.5.23"} holds for 0.5.23 only: not for 0.5.23.post1, 0.5.23rc1 or a local
build 0.5.23+cu130, which are other builds.
"""

from __future__ import annotations

import functools
from typing import Any

from packaging.version import InvalidVersion, Version

from blackwell_stack.errors import StackError

RANGE_KEYS = ("min", "max", "below")


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


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as a sorts before, with or after b."""
    pa, pb = parse(a), parse(b)
    return (pa > pb) - (pa < pb)


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
