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
              "hash_checked" (computed, registry, public or none: model.plan.HASH_CHECKS),
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

from blackwell_stack.errors import DataError, StackError
from blackwell_stack.fileio import atomic_write_json
from blackwell_stack.hashes import is_sri
from blackwell_stack.model import registry
from blackwell_stack.model.plan import check_hash_checked

SCHEMA_VERSION = 1
ENTRY_FIELDS = ("filename", "url", "hash", "hash_source", "hash_checked", "verified", "reason")
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
    data = registry.load("kept-wheel-pins", file=path, check=validate, missing=StackError(
        f"{path}: no such pins file", "check the path, or create it with `blackwell-stack pins update`"))
    return PinsFile(path, data)


def validate(data: Any, path: str | Path) -> None:
    """Raise DataError naming the file, entry and field of the first problem."""
    if not isinstance(data, dict):
        raise DataError(path, None, None, "the top level must be a JSON object")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise DataError(path, None, "schema_version", f"must be {SCHEMA_VERSION}, found {data.get('schema_version')!r}")
    if not isinstance(data.get("update_command"), str) or not data["update_command"].strip():
        raise DataError(path, None, "update_command", "must name the command that fills unverified pins")
    packages = data.get("packages")
    if not isinstance(packages, dict) or not packages:
        raise DataError(path, None, "packages", "must be a non-empty object of package name -> pin")
    for name, pkg in packages.items():
        if not isinstance(pkg, dict):
            raise DataError(path, name, None, "must be an object with version and wheels")
        if pkg.get("version") is not None and not isinstance(pkg["version"], str):
            raise DataError(path, name, "version", "must be a string or null")
        wheels = pkg.get("wheels")
        if not isinstance(wheels, dict) or not wheels:
            raise DataError(path, name, "wheels", "must be a non-empty object of <system>-<pyVerNoDot> -> wheel pin")
        for key, entry in wheels.items():
            _validate_entry(path, f"{name}/{key}", entry, pkg.get("version"))


def _validate_entry(path, where: str, entry: Any, version: str | None) -> None:
    if not isinstance(entry, dict):
        raise DataError(path, where, None, "must be an object")
    for field in ENTRY_FIELDS:
        if field not in entry:
            raise DataError(path, where, field, "is missing", f"every wheel pin has: {', '.join(ENTRY_FIELDS)}")
    if not isinstance(entry["verified"], bool):
        raise DataError(path, where, "verified", f"must be true or false, found {entry['verified']!r}")
    check_hash_checked(entry["hash_checked"], path, where)
    h = entry["hash"]
    if h is not None and not (isinstance(h, str) and is_sri(h)):
        raise DataError(path, where, "hash", f"must be a sha256 SRI hash (sha256-<base64>) or null, found {h!r}")
    if entry["verified"]:
        for field in ("filename", "url", "hash", "hash_source"):
            if not entry[field]:
                raise DataError(path, where, field, "a verified pin needs it",
                                "set verified to false with a reason, or fill the pin with its update command")
        if version is None:
            raise DataError(path, where.split("/")[0], "version", "a package with a verified wheel needs a version")
        if "/" in entry["filename"] or "%" in entry["filename"]:
            raise DataError(path, where, "filename", "must be a plain file name (no '/' or %-escapes): Nix uses it as the store name")
    elif not entry["reason"]:
        raise DataError(path, where, "reason", "an unverified pin must say why it is unverified")


def wheel_pin(pins: PinsFile, package: str, system: str, python_version: str) -> dict[str, str]:
    """The fetchurl arguments of a verified wheel pin (the system's, else the pure "any" one);
    the same answer as lib/pins.nix `wheel`.

    Raises StackError naming the command that fills the pin when it is missing
    or unverified.
    """
    pkg = pins.packages.get(package)
    if pkg is None:
        raise StackError(f"blackwell-stack: {pins.path} has no package {package}")
    wanted = wheel_key(system, python_version)
    # A pure-Python wheel is pinned once, under "any", for every system.
    key = wanted if wanted in pkg["wheels"] else ANY_KEY
    entry = pkg["wheels"].get(key)
    if entry is None:
        pinned = ", ".join(sorted(pkg["wheels"]))
        raise StackError(
            f"blackwell-stack: {pins.path} pins no {package} wheel for {wanted} (pinned: {pinned})",
            f"add it with: {pins.update_command}",
        )
    if not (entry["verified"] and entry["hash"] and entry["url"]):
        reason = f" ({entry['reason']})" if entry.get("reason") else ""
        raise StackError(
            f"blackwell-stack: the pin of {package} for {key} in {pins.path} is not verified{reason}",
            f"fill it in with: {pins.update_command}",
        )
    return {"pname": package, "version": pkg["version"], "name": entry["filename"], "url": entry["url"], "hash": entry["hash"]}


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
    hash_checked: str  # model.plan.HASH_CHECKS
    verified: bool
    reason: str | None
    file: str
    update_command: str | None = None  # the command that fills this pin when unverified

    def to_json(self) -> dict:
        return asdict(self)
