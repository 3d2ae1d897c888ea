"""The rehearsal's data: nixpkgs' CUDA components with their PyPI wheels, and the tool stand-ins.

tests/support/rehearsal/cuda-13.0.2.json maps each cudaPackages_13_0 component the Nix
code uses to the wheel of the same version, with the outputs and fixups of
nixpkgs' package; tests/support/rehearsal/tools.json names the CMake and Python build
system wheels at the versions the flake's inputs pin. Both are checked against
PyPI and the locked inputs by tests/test_rehearsal_data.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blackwell_stack.data import shape
from blackwell_stack.data.schemas import NAMES, SHA256
from blackwell_stack.data.shape import Int, ListOf, Literal, Map, Obj, Str
from blackwell_stack.errors import DataError
from blackwell_stack.pypi import ReleaseFile
from support.rehearsal import glibc

HERE = Path(__file__).resolve().parent
_WHEEL = Obj({"name": Str(nonempty=True), "version": Str(nonempty=True), "filename": Str(nonempty=True),
              "url": Str(pattern=r"https://\S+"), "sha256": SHA256, "size": Int(minimum=1)})
# The files' shapes; the loaders below check what the values mean.
SHAPES = {
    "cuda-13.0.2.json": Obj({
        "schema_version": Literal((1,)),
        "components": Map(Obj({"version": Str(nonempty=True), "outputs": ListOf(Str(nonempty=True)),
                               "wheel": _WHEEL})),
    }),
    "tools.json": Obj({
        "schema_version": Literal((1,)),
        "cmake": Obj({"wheel": _WHEEL}),
        "python_build_system": Obj({"wheels": ListOf(_WHEEL)},
                                   optional={"from_the_stack_lock": NAMES}),
        "numactl": Obj({"debian_packages": NAMES}),
        "glibc": Obj({"debian": Obj({"package": Str(nonempty=True), "version": Str(nonempty=True),
                                     "suite": Str(nonempty=True), "sha256": SHA256,
                                     "size": Int(minimum=1)})}),
    }),
}

# buildRedist's outputs, in the order its install phase moves files into them
# (pkgs/development/cuda-modules/buildRedist/default.nix, expectedOutputs).
OUTPUT_ORDER = ("out", "doc", "samples", "python", "bin", "dev", "include", "lib", "static", "stubs")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


# A wheel the rehearsal reads: PyPI's record of the file.
Wheel = ReleaseFile


@dataclass(frozen=True)
class Component:
    """One cudaPackages_13_0 package: its outputs and fixups in nixpkgs, and the wheel it is rehearsed with."""

    name: str
    version: str
    outputs: tuple[str, ...]
    wheel: Wheel
    # Outputs the dev output propagates beyond bin/include/lib (buildRedist's propagatedBuildOutputs).
    propagated_build_outputs: tuple[str, ...] = ()
    # (component, output or None for the package) the package propagates to its dependents.
    propagated_build_inputs: tuple[tuple[str, str | None], ...] = ()
    # (from prefix, to prefix) renames and dropped prefixes, as the package file's prePatch does them.
    moves: tuple[tuple[str, str], ...] = ()
    drop: tuple[str, ...] = ()
    differences: str = ""
    nixpkgs_file: dict[str, str] = field(default_factory=dict)


def _wheel(raw: Any, where: Path, entry: str) -> Wheel:
    if not isinstance(raw, dict):
        raise DataError(where, entry, "wheel", "must be an object")
    for key in ("name", "version", "filename", "url", "sha256", "size"):
        if key not in raw:
            raise DataError(where, entry, f"wheel.{key}", "is missing")
    if not _SHA256.match(str(raw["sha256"])):
        raise DataError(where, entry, "wheel.sha256", f"{raw['sha256']!r} is not a hex sha256")
    if not str(raw["url"]).startswith("https://") or not str(raw["url"]).endswith("/" + str(raw["filename"])):
        raise DataError(where, entry, "wheel.url", "must be an https URL ending in the wheel's filename")
    if not isinstance(raw["size"], int) or raw["size"] <= 0:
        raise DataError(where, entry, "wheel.size", "must be a positive integer")
    return Wheel(str(raw["name"]), str(raw["version"]), str(raw["filename"]), str(raw["url"]), str(raw["sha256"]),
                 int(raw["size"]), "bdist_wheel")


def _read(name: str, root: Path = HERE) -> tuple[Path, dict[str, Any]]:
    """The rehearsal's data file `name`, its shape checked."""
    path = root / name
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(path, None, None, f"cannot be read: {exc}") from None
    shape.check(SHAPES[name], data, path)
    return path, data


def _pairs(raw: Any, where: Path, entry: str, key: str) -> tuple[tuple[Any, Any], ...]:
    if not isinstance(raw, list) or not all(isinstance(p, list) and len(p) == 2 for p in raw):
        raise DataError(where, entry, key, "must be a list of [a, b] pairs")
    return tuple((p[0], p[1]) for p in raw)


def cuda_components(root: Path = HERE) -> dict[str, Component]:
    """Every component of cuda-13.0.2.json, by nixpkgs attribute name."""
    path, data = _read("cuda-13.0.2.json", root)
    raw = data.get("components")
    if not isinstance(raw, dict) or not raw:
        raise DataError(path, None, "components", "must be a non-empty object")
    found = {}
    for name, entry in raw.items():
        outputs = tuple(entry.get("outputs") or ())
        if not outputs or outputs[0] != "out" or not set(outputs) <= set(OUTPUT_ORDER):
            raise DataError(path, name, "outputs", f"must start with out and use only {', '.join(OUTPUT_ORDER)}")
        extra = tuple(entry.get("propagated_build_outputs", ()))
        if not set(extra) <= set(outputs):
            raise DataError(path, name, "propagated_build_outputs", "must be outputs of the package")
        found[name] = Component(
            name=name,
            version=str(entry.get("version", "")),
            outputs=outputs,
            wheel=_wheel(entry.get("wheel"), path, name),
            propagated_build_outputs=extra,
            propagated_build_inputs=_pairs(entry.get("propagated_build_inputs", []), path, name,
                                           "propagated_build_inputs"),
            moves=_pairs(entry.get("moves", []), path, name, "moves"),
            drop=tuple(entry.get("drop", ())),
            differences=str(entry.get("differences", "")),
            nixpkgs_file=dict(entry.get("nixpkgs_file") or {}),
        )
    for name, component in found.items():
        for dep, _output in component.propagated_build_inputs:
            if dep not in found:
                raise DataError(path, name, "propagated_build_inputs", f"names {dep!r}, which is not a component")
    return found


def tools(root: Path = HERE) -> dict[str, Any]:
    """tools.json, with its wheels as Wheel objects."""
    path, data = _read("tools.json", root)
    try:
        cmake = _wheel(data["cmake"]["wheel"], path, "cmake")
        build_system = [_wheel(w, path, f"python_build_system.{w.get('name')}")
                        for w in data["python_build_system"]["wheels"]]
        debian = list(data["numactl"]["debian_packages"])
        libc = data["glibc"]["debian"]
        glibc_dev = glibc.Package(libc["package"], libc["version"], libc["suite"], libc["sha256"])
        driver = [glibc.Package(p["package"], p["version"], p["suite"], p["sha256"], p["component"])
                  for p in data["driver"]["debian"]]
    except (KeyError, TypeError) as exc:
        raise DataError(path, None, None, f"is missing {exc}") from None
    return {"cmake": cmake, "python_build_system": build_system,
            "from_the_stack_lock": list(data["python_build_system"].get("from_the_stack_lock", [])),
            "numactl": debian, "glibc": glibc_dev, "driver": driver}
