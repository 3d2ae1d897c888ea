"""One pin as a row of `pins show` and of plan's pinned inputs (PinRow)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from blackwell_stack.data.plan import checked_words, hash_checked_by, standing


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

    @property
    def checked(self) -> str:
        """In `plan`'s words (data/plan.py): what checked its hash, "not checked here (...)", or UNVERIFIED."""
        return checked_words(self.verified, hash_checked_by(self.hash_checked))

    @property
    def standing(self) -> str:
        """One of data/plan.py's STANDINGS, as `plan` counts it."""
        return standing({"verified": self.verified, "checked_by": hash_checked_by(self.hash_checked)})

    def to_json(self) -> dict:
        return {**asdict(self), "checked": self.checked}
