"""What each part of the stack contributes to `blackwell-stack plan`.

Every area (pins, kernel, serve, doctor, verify) has a `plan_section()`
returning a PlanSection; `plan` prints them in order and lists every
unverified item at the end.

Two things are said about each value, and kept apart. `verified`: the value
is filled in and vouched for by its source (an unverified pin names the
command that fills it). `checked_by`: what checked it on this project's own
machines (a hash computed here, PyPI's own sha256, a test on the real
artifact), or `NOT_CHECKED_HERE` with the reason, for what only its source
vouches for or what needs the GPU host; None makes no claim beyond the
source (a setting the project chose).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

NOT_CHECKED_HERE = "not checked here"
# A "not checked here" reason that names this is something only the GPU host can check (doctor, smoke, bench there).
GPU_HOST = "GPU host"

UNVERIFIED = "unverified"
NEEDS_GPU_HOST = "needs the GPU host"
NOT_CHECKABLE = "cannot be checked here"
CHECKED = "checked"
STANDINGS = (UNVERIFIED, NEEDS_GPU_HOST, NOT_CHECKABLE, CHECKED)


@dataclass
class PlanItem:
    name: str
    value: str
    source: str | None = None  # where the value or its hash came from
    verified: bool = True
    note: str | None = None  # why unverified, or how to fill it in
    checked_by: str | None = None  # what checked it here, or "not checked here (why)"; None: no claim
    detail: bool = False  # one of many like rows (a locked file): in --json and --wide, summed up otherwise


@dataclass
class PlanSection:
    key: str  # stable JSON key: "pins", "stack-<name>", "kernel", "service" ("service-<name>" per stack), "doctor", "verify"
    title: str
    items: list[PlanItem] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)  # commands a person runs for this part

    def to_json(self) -> dict:
        return {"title": self.title, "items": [asdict(i) for i in self.items], "commands": list(self.commands)}


def not_checked_here(why: str) -> str:
    return f"{NOT_CHECKED_HERE} ({why})"


def standing(verified: bool, checked_by: str | None) -> str:
    """One of STANDINGS for an item (PlanItem fields, or the same keys of its JSON)."""
    text = checked_by or ""
    if not verified:
        return UNVERIFIED
    if text.startswith(NOT_CHECKED_HERE):
        return NEEDS_GPU_HOST if GPU_HOST in text else NOT_CHECKABLE
    return CHECKED


def hash_checked_by(hash_source: str | None) -> str:
    """What a pin's hash_source says checked the hash.

    Only two kinds count as checked: a hash computed by the project from the
    file itself, and the registry's own digest of the file (PyPI's sha256).
    Everything else (public lock files, a hash named by another project) is
    shown as not checked here, whatever the pin's `verified` says.
    """
    text = (hash_source or "").strip()
    lowered = text.lower()
    if "not computed here" in lowered:
        return not_checked_here("taken from public sources")
    if lowered.startswith("computed here") or "computed by `blackwell-stack" in lowered:
        return "hash computed here"
    if "registry sha256" in lowered or lowered.startswith("pypi's sha256"):
        return "PyPI's sha256"
    if not text:
        return not_checked_here("no hash source")
    return not_checked_here("named by a public source")
