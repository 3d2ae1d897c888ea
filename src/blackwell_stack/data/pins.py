"""Pins: one pin as a row of `pins show` (PinRow), and wheel pins files (`stacks/*/pins.json`): load, validate,
look up, save.

The schema (version 1), shared with lib/pins.nix:

    {
      "schema_version": 1,
      "description": "...",
      "update_command": "the one command that fills unverified entries",
      "packages": {
        "<name>": {
          "version": "<version>" | null,
          "wheels": {
            "<system>-<pyVerNoDot>" | "any": {
              "filename", "url", "hash" (SRI or null), "hash_source" (prose),
              "hash_checked" (computed, registry, public or none: data.plan.HASH_CHECKS),
              "verified" (bool), "reason" (why unverified, or null)
            }
          }
        }
      }
    }

Other top-level keys (index_url, date, cuda) are kept as they are.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from blackwell_stack.data import registry, schemas, shape
from blackwell_stack.data.plan import checked_words, hash_checked_by, standing
from blackwell_stack.errors import DataError, StackError
from blackwell_stack.fileio import atomic_write_json

SCHEMA_VERSION = schemas.KEPT_WHEEL_PINS_SCHEMA
ANY_KEY = "any"  # a pure-Python wheel, the same for every system and Python


def python_key(python_version: str) -> str:
    """'3.12' -> '312' (the key suffix nixpkgs' binary-hashes.nix uses)."""
    return python_version.replace(".", "")


def wheel_key(system: str, python_version: str) -> str:
    return f"{system}-{python_key(python_version)}"


@dataclass
class PinsFile:
    path: Path
    data: dict[str, Any]

    @property
    def update_command(self) -> str:
        return self.data["update_command"]

    @property
    def packages(self) -> dict[str, Any]:
        return self.data["packages"]

    def save(self) -> None:
        validate(self.data, self.path)
        atomic_write_json(self.path, self.data)


def load_pins(path: str | Path) -> PinsFile:
    path = Path(path)
    data = registry.load("kept-wheel-pins", file=path, check=_check_pins, missing=StackError(
        f"{path}: no such pins file", "check the path, or create it with `blackwell-stack pins update`"))
    return PinsFile(path, data)


def validate(data: Any, path: str | Path) -> None:
    """DataError naming the file, entry and field of the first problem: the shape (schemas.KEPT_WHEEL_PINS), then
    what a verified or unverified pin needs."""
    shape.check(schemas.KEPT_WHEEL_PINS, data, path)
    _check_pins(data, path)


def _check_pins(data: dict[str, Any], path: str | Path) -> None:
    for name, pkg in data["packages"].items():
        for key, entry in pkg["wheels"].items():
            where = f"packages.{name}.wheels.{key}"  # as the shape names an entry
            if not entry["verified"]:
                if not entry["reason"]:
                    raise DataError(path, where, "reason", "an unverified pin must say why it is unverified")
                continue
            for field in ("filename", "url", "hash", "hash_source"):
                if not entry[field]:
                    raise DataError(path, where, field, "a verified pin needs it",
                                    "set verified to false with a reason, or fill the pin with its update command")
            if pkg["version"] is None:
                raise DataError(path, f"packages.{name}", "version", "a package with a verified wheel needs a version")


def unverified(pins: PinsFile) -> list[dict[str, str]]:
    """Every (package, key) whose pin is not verified; the same as lib/pins.nix `unverified`."""
    return [
        {"package": name, "key": key}
        for name in sorted(pins.packages)
        for key in sorted(pins.packages[name]["wheels"])
        if not pins.packages[name]["wheels"][key]["verified"]
    ]


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
