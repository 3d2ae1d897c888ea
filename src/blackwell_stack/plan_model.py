"""What each part of the stack contributes to `blackwell-stack plan`.

Every area (pins, kernel, serve, doctor, verify) has a `plan_section()`
returning a PlanSection; `plan` prints them in order and lists every
unverified item at the end.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class PlanItem:
    name: str
    value: str
    source: str | None = None  # where the value or its hash came from
    verified: bool = True
    note: str | None = None  # why unverified, or how to fill it in


@dataclass
class PlanSection:
    key: str  # stable JSON key: "pins", "stack-<name>", "kernel", "service" ("service-<name>" per stack), "doctor", "verify"
    title: str
    items: list[PlanItem] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)  # commands a person runs for this part

    def to_json(self) -> dict:
        return {"title": self.title, "items": [asdict(i) for i in self.items], "commands": list(self.commands)}
