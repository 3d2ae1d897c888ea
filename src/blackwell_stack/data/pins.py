"""One pin as a row of `pins show` and of plan's pinned inputs (PinRow)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class PinRow:
    what: str
    version: str | None
    url: str | None
    hash: str | None
    hash_source: str | None
    hash_checked: str  # data.plan.HASH_CHECKS
    verified: bool
    reason: str | None
    file: str
    update_command: str | None = None  # the command that fills this pin when unverified

    def to_json(self) -> dict:
        return asdict(self)
