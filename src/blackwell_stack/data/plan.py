"""What each part of the stack contributes to `blackwell-stack plan` (cli/areas.py lists the parts).

Two things are said about each value, and kept apart. `verified`: its
source vouches for it (an unverified pin names the command that fills it).
`checked_by`: what checked it on this project's own machines (a hash
computed here, PyPI's sha256, a test on the real artifact), or
`NOT_CHECKED_HERE` with the reason; None claims nothing beyond the source.

`plan`, `pins show` and `stack doctor` share one vocabulary (STANDINGS): a
value is checked here, not checked here, waits for the GPU host, or is
unverified. An unverified item outside the service's settings stops the
build; the rest is pending, not broken.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

NOT_CHECKED_HERE = "not checked here"
# What an item needs before it can be checked (PlanItem.needs): the GPU host (doctor, smoke, bench there).
GPU_HOST = "gpu-host"

UNVERIFIED = "unverified"
NEEDS_GPU_HOST = "waits for the GPU host"
CHECKED = "checked here"
STANDINGS = (UNVERIFIED, NEEDS_GPU_HOST, NOT_CHECKED_HERE, CHECKED)


@dataclass
class PlanItem:
    name: str
    value: str
    source: str | None = None  # where the value or its hash came from
    verified: bool = True
    note: str | None = None  # why unverified, or how to fill it in
    checked_by: str | None = None  # what checked it here, or "not checked here (why)"; None: no claim
    detail: bool = False  # one of many like rows (a locked file): in --json and --wide, summed up otherwise
    needs: str | None = None  # GPU_HOST: where it can be checked, when not here


@dataclass
class PlanSection:
    key: str  # stable JSON key: "pins", "stack-<name>", "kernel", "service" ("service-<name>" per stack), "doctor", "verify"
    title: str
    items: list[PlanItem] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)  # commands a person runs for this part

    def to_json(self) -> dict:
        return {"title": self.title, "items": [asdict(i) for i in self.items], "commands": list(self.commands)}


def checked_words(verified: bool, checked_by: str | None) -> str:
    """The `checked` column of `plan --wide` and `pins show`: UNVERIFIED, else what checked the value ('-': no
    claim beyond its source)."""
    return checked_by or "-" if verified else UNVERIFIED.upper()


def not_checked_here(why: str) -> str:
    return f"{NOT_CHECKED_HERE} ({why})"


def standing(item: dict) -> str:
    """One of STANDINGS for an item (the keys of its JSON)."""
    if not item["verified"]:
        return UNVERIFIED
    if item.get("needs") == GPU_HOST:
        return NEEDS_GPU_HOST
    if (item["checked_by"] or "").startswith(NOT_CHECKED_HERE):  # only not_checked_here() writes it
        return NOT_CHECKED_HERE
    return CHECKED


# What checked a pin's hash, as its data says (`hash_checked`; its `hash_source` is the prose): only two
# kinds count as checked, a hash the project computed from the file itself and the registry's own digest
# of the file (PyPI's sha256). A hash only a public source names is not checked here, whatever the pin's
# `verified` says.
HASH_CHECKED_BY = {
    "computed": "hash computed here",
    "registry": "PyPI's sha256",
    "public": not_checked_here("named by a public source"),
    "lock": not_checked_here("as Nix wrote it into flake.lock"),
    "none": not_checked_here("no hash source"),
}
HASH_CHECKS = tuple(HASH_CHECKED_BY)


def hash_checked_by(kind: str) -> str:
    return HASH_CHECKED_BY[kind]
