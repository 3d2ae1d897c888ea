"""One check result: ok / warn / fail, what was found, and the one-line fix."""

from __future__ import annotations

from dataclasses import dataclass

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass
class Check:
    group: str  # "host", "python", "build"
    name: str
    status: str
    value: str
    message: str = ""
    fix: str | None = None


def worst(checks: list[Check]) -> str:
    return max((c.status for c in checks), key=(OK, WARN, FAIL).index, default=OK)
