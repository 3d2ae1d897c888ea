"""Wheel file names and metadata: pick the wheel for a system and Python, read Requires-Dist."""

from __future__ import annotations

import re
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from blackwell_stack.errors import StackError
from blackwell_stack.formats import zipmember

# Nix system -> the machine part of a manylinux platform tag.
SYSTEM_MACHINES = {"x86_64-linux": "x86_64", "aarch64-linux": "aarch64"}


def parse(filename: str):
    """(name, Version, tags) of a wheel file name, or None when it is not a wheel."""
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    return name, version, tags


def matches(filename: str, system: str, python_version: str) -> bool:
    """Whether a wheel installs on `system` with CPython `python_version` ("3.12")."""
    parsed = parse(filename)
    if parsed is None:
        return False
    machine = SYSTEM_MACHINES.get(system)
    if machine is None:
        raise StackError(f"unknown system {system!r}", f"use one of: {', '.join(SYSTEM_MACHINES)}")
    cp = "cp" + python_version.replace(".", "")
    for tag in parsed[2]:
        interp_ok = tag.interpreter in (cp, "py3", f"py{python_version.replace('.', '')}") or (
            tag.abi == "abi3" and tag.interpreter.startswith("cp") and int(tag.interpreter[3:] or 0) <= int(cp[3:])
        )
        plat_ok = tag.platform == "any" or (
            (tag.platform.startswith("manylinux") or tag.platform.startswith("linux")) and tag.platform.endswith(machine)
        )
        if interp_ok and plat_ok:
            return True
    return False


def is_pure(filename: str) -> bool:
    parsed = parse(filename)
    return parsed is not None and all(t.platform == "any" for t in parsed[2])


def read_metadata(wheel: str | Path):
    """The METADATA headers of a wheel (email.message.Message)."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(names) != 1:
                raise StackError(f"{wheel}: expected one *.dist-info/METADATA, found {len(names)}")
            return HeaderParser().parsestr(zipmember.read_member(zf, names[0], wheel).decode("utf-8", errors="replace"))
    except zipfile.BadZipFile as exc:
        raise StackError(f"{wheel}: not a wheel (bad zip file: {exc})") from exc


def requirement_pin(wheel: str | Path, package: str) -> str | None:
    """The exact version `wheel` requires of `package` (`Requires-Dist: package==X`), or None."""
    from packaging.requirements import InvalidRequirement, Requirement

    for line in read_metadata(wheel).get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() != package.lower():
            continue
        if req.marker is not None and not req.marker.evaluate({"platform_system": "Linux", "sys_platform": "linux", "platform_machine": "x86_64"}):
            continue
        exact = [s.version for s in req.specifier if s.operator in ("==", "===")]
        if exact:
            return exact[0]
    return None


def nightly_date(version: Version) -> str | None:
    """'20260307' from 2.12.0.dev20260307+cu130, else None."""
    if version.dev is None:
        return None
    text = str(version.dev)
    return text if re.fullmatch(r"\d{8}", text) else None
