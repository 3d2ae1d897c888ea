"""The reference wheel (pkgs/sgl-kernel/reference-wheel.json): one configuration, measured, bit for bit.

The file holds the current reference (or null, with the reason) and the references withdrawn before it, each with
why. A current reference records the build record `kernel build` writes into the wheel
(sgl_kernel/_build_info.json), the conditions the record does not name but the bytes depend on
(kernel/reproducibility/conditions.py), and the result: the wheel's sha256 and size, and every member's sha256.

Three questions, one function each: does the record still describe the repository (`stale_inputs`, run by the
test suite so that no input changes silently); is a planned build the reference configuration
(`compare_configuration`); is a wheel the reference wheel, and where does it differ (`compare_wheel`).
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from blackwell_stack import inputfiles
from blackwell_stack.data import registry, schemas
from blackwell_stack.data import stack as stack_data
from blackwell_stack.errors import DataError
from blackwell_stack.formats import wheeldiff, wheelzip
from blackwell_stack.hashes import sha256_file
from blackwell_stack.kernel.build import toolchain
from blackwell_stack.kernel.inputs import patch_series, recipe, sourcedir, sources
from blackwell_stack.kernel.reproducibility import buildinfo
from blackwell_stack.kernel.reproducibility.conditions import CONDITIONS

SCHEMA_VERSION = schemas.REFERENCE_WHEEL_SCHEMA
BUILD_RECORD_MEMBER = schemas.BUILD_RECORD_MEMBER


@dataclass(frozen=True)
class Reference:
    path: Path
    build_record: dict[str, Any]
    conditions: dict[str, str]
    command: str
    wheel_name: str
    wheel_sha256: str
    wheel_size: int
    members: dict[str, str]  # member -> sha256, every member but RECORD
    compiled: dict[str, dict[str, Any]]  # the ELF members: sha256 and size

    @property
    def arch(self) -> str:
        return str(self.build_record.get("cuda_archs"))


@dataclass(frozen=True)
class Document:
    path: Path
    current: Reference | None
    reason: str  # why there is no current reference ("" when there is one)
    withdrawn: list[dict[str, str]]  # references that are no longer one: wheel, sha256, arch, measured, why
    to_record: str  # how the next one is measured


def document(path: str | Path | None = None) -> Document:
    """The whole reference file, checked by its shape (data/schemas.py) and the conditions it must name."""
    path = Path(path) if path is not None else registry.path("reference-wheel")
    data = registry.load("reference-wheel", file=path, check=_check_conditions)
    withdrawn = [{"wheel": w["wheel"]["name"], "sha256": w["wheel"]["sha256"], "arch": w["cuda_archs"],
                  "measured": w["measured"], "why": w["why"]} for w in data["withdrawn"]]
    current = data["current"]
    if current is None:
        return Document(path, None, data["current_reason"], withdrawn, data["to_record"])
    config, result = current["configuration"], current["result"]
    wheel = result["wheel"]
    ref = Reference(path, config["build_record"], dict(config["conditions"]), config["command"], wheel["name"],
                    wheel["sha256"], wheel["size"], dict(result["members"]), dict(result["compiled"]))
    return Document(path, ref, "", withdrawn, data["to_record"])


def _check_conditions(data: dict[str, Any], path: Path) -> None:
    """A current reference names every condition of kernel/reproducibility/conditions.py (after the shape)."""
    if data["current"] is None:
        return
    conditions = data["current"]["configuration"]["conditions"]
    missing = [c for c in CONDITIONS if not conditions.get(c)]
    if missing:
        raise DataError(path, None, "current.configuration.conditions", f"needs a string for {', '.join(missing)}")


def load(path: str | Path | None = None) -> Reference | None:
    """The current reference; None while none is measured (Document.reason says why)."""
    return document(path).current


# -- differences between two JSON values, by path -----------------------------------------

@dataclass(frozen=True)
class Difference:
    what: str  # a JSON path into the build record, or a condition's name
    reference: Any
    this: Any
    owner: str = ""  # the file (or option) that decides the value

    def line(self) -> str:
        text = f"{self.what}: reference {_short(self.reference)}, this build {_short(self.this)}"
        return f"{text} ({self.owner})" if self.owner else text


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def json_differences(a: Any, b: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Every leaf where a and b differ: (path, a's value, b's value); lists of patches by name."""
    out = []
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            out += json_differences(a.get(key), b.get(key), f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            label = x.get("name") if isinstance(x, dict) and isinstance(y, dict) and x.get("name") == y.get("name") else i
            out += json_differences(x, y, f"{prefix}[{label}]")
    elif a != b:
        out.append((prefix, a, b))
    return out


def record_differences(ours: Any, theirs: Any) -> list[Difference]:
    return [Difference(p, a, b, owner_of(p)) for p, a, b in json_differences(ours, theirs)]


_OWNERS = {
    **dict.fromkeys(("cmake_defines", "environment", "cuda_archs"), "pkgs/sgl-kernel/recipe.json (or --arch)"),
    **dict.fromkeys(("sglang", "sgl_kernel_version"), "pkgs/sgl-kernel/sources.json (or --src)"),
    "torch": "--python's torch, --allow-torch and the stack's lock",
    "toolchain": "the build tools found",
}


def owner_of(record_path: str) -> str:
    """The file of the repository (or the option) that decides a value of the build record."""
    top = record_path.split(".")[0].split("[")[0]
    if top == "patches":
        m = re.match(r"patches\[([^\]]+)\]", record_path)
        name = m.group(1) if m and not m.group(1).isdigit() else None
        return f"patches/sgl-kernel/{name}.patch" if name else "patches/sgl-kernel/series"
    if top == "sources":
        pinned = record_path.endswith(("pinned_hash", ".rev"))
        return "pkgs/sgl-kernel/sources.json" if pinned else "--sources and --allow-source-mismatch"
    return _OWNERS.get(top, "src/blackwell_stack/kernel/reproducibility/buildinfo.py")


# -- does the recorded configuration still describe the repository? ------------------------

def expected_record(ref: Reference) -> dict[str, Any]:
    """The build record this repository writes today for the reference configuration: what the repository decides
    (recipe, patches, pins, the record's wording) from the repository, what the build found (the sources' NAR
    hashes, the torch, the tools) and the options it was given from the recorded record."""
    recorded = ref.build_record
    arch = str(recorded.get("cuda_archs"))
    data = sources.load()
    torch_rec = recorded.get("torch") or {}
    override = torch_rec.get("override") or ""
    allow_torch = override.split()[-1] if override.startswith("--allow-torch ") else None
    # The stack an --allow-torch record names: "--allow-torch 2.12.0 (instead of the stable stack's 2.12.1)".
    stack = re.search(r"the (\S+) stack's", str(torch_rec.get("source") or ""))
    expected = toolchain.expected_torch("python", stack_data.load(stack.group(1) if stack else None), allow_torch)
    return json.loads(buildinfo.render(
        recipe.load(), arch,
        sgl_kernel_version=data["sglang"].get("sgl_kernel_version"),
        sglang_pin=data["sglang"],
        series=patch_series.load_series(),
        sources=_expected_sources(recorded.get("sources") or {}, data, arch),
        torch={"built_against": torch_rec.get("built_against"), **expected.to_json()},
        toolchain=dict(recorded.get("toolchain") or {}),
    ))


def _expected_sources(recorded: Mapping[str, Any], data: dict[str, Any], arch: str) -> dict[str, Any]:
    pins = {}
    for pin in sourcedir.entries(data, recipe.arch_list(arch)):
        was = (recorded.get("pins") or {}).get(pin.relpath) or {}
        pins[pin.relpath] = buildinfo.source_pin(pin, was.get("hash"), was.get("accepted_mismatch", False))
    return {**recorded, "pins": pins}


def stale_inputs(ref: Reference | None = None) -> list[Difference]:
    """How the recorded build record differs from what the repository writes for it now (empty: current, or no
    reference recorded)."""
    ref = ref or load()
    if ref is None:
        return []
    return record_differences(ref.build_record, expected_record(ref))


# -- is a planned build the reference configuration? ----------------------------------------

@dataclass
class ConfigVerdict:
    """How a build's configuration compares with the reference's."""

    reference: Reference
    record: list[Difference] = field(default_factory=list)
    conditions: list[Difference] = field(default_factory=list)

    @property
    def same_record(self) -> bool:
        return not self.record

    @property
    def same(self) -> bool:
        return not self.record and not self.conditions

    def summary(self) -> str:
        head, *rest = self.lines()
        return head + (" " + "; ".join(rest) if rest else "")

    def lines(self) -> list[str]:
        """The verdict, then one line per difference (a terminal shows them so; summary() joins them)."""
        ref = self.reference
        if self.same:
            return [f"this is the reference configuration: a build should give {ref.wheel_name}, "
                    f"sha256 {ref.wheel_sha256} ({ref.path.name})"]
        if self.same_record:
            return ["the inputs are the reference's, but not every condition is (bit-for-bit identity is not "
                    "expected; the wheel is compared all the same):", *(d.line() for d in self.conditions)]
        out = [f"no reference wheel exists for these inputs ({len(self.record)} differ from the reference "
               f"configuration in {ref.path.name}):", *(d.line() for d in self.record[:6])]
        if len(self.record) > 6:
            out.append("...")
        if self.conditions:
            out.append(f"the conditions differ too: {', '.join(d.what for d in self.conditions)}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "reference": str(self.reference.path),
            "same_configuration": self.same,
            "same_inputs": self.same_record,
            "input_differences": [asdict(d) for d in self.record],
            "condition_differences": [asdict(d) for d in self.conditions],
            "summary": self.summary(),
        }


def compare_configuration(ref: Reference, build_record: str | Mapping[str, Any],
                          conditions: Mapping[str, str | None]) -> ConfigVerdict:
    record = json.loads(build_record) if isinstance(build_record, str) else dict(build_record)
    return ConfigVerdict(ref, record_differences(ref.build_record, record), [
        Difference(name, ref.conditions.get(name), "(not found)" if conditions.get(name) is None else conditions[name])
        for name in CONDITIONS if ref.conditions.get(name) != conditions.get(name)])


# -- is a wheel the reference wheel? --------------------------------------------------------

# Classes of a member that differs, from harmless to real.
BUILD_RECORD, RECORD, COMPILED, OTHER, ONLY_HERE, ONLY_REFERENCE = (
    "build-record", "record", "compiled-code", "other-file", "only-in-wheel", "only-in-reference")
_SEVERITY = {c: i for i, c in enumerate((RECORD, BUILD_RECORD, OTHER, ONLY_HERE, ONLY_REFERENCE, COMPILED))}


@dataclass
class WheelVerdict:
    reference: Reference
    wheel: Path
    sha256: str
    size: int
    members: list[dict[str, Any]] = field(default_factory=list)  # name, class, detail

    @property
    def identical(self) -> bool:
        return self.sha256 == self.reference.wheel_sha256

    @property
    def kind(self) -> str:
        """identical, zip-metadata, build-record, or the worst class of a differing member."""
        if self.identical:
            return "identical"
        classes = {m["class"] for m in self.members} - {RECORD}
        return max(classes, key=_SEVERITY.__getitem__) if classes else "zip-metadata"

    def summary(self) -> str:
        ref = self.reference
        if self.identical:
            return f"reproduced the reference wheel bit for bit (sha256 {ref.wheel_sha256}, {ref.wheel_size} bytes)"
        kind = self.kind
        head = f"not the reference wheel: sha256 {self.sha256} ({self.size} bytes), reference {ref.wheel_sha256}"
        if kind == "zip-metadata":
            return f"{head}; every member is the reference's: only the zip's metadata differs (timestamps, order, compression)"
        if kind == BUILD_RECORD:
            return (f"{head}; only the build record differs (the compiled code is the reference's): "
                    + next(m["detail"] for m in self.members if m["class"] == BUILD_RECORD))
        shown = [m["name"] for m in self.members if m["class"] != RECORD]
        what = "compiled code differs" if kind == COMPILED else "files differ"
        return f"{head}; {what}: {', '.join(shown[:5])}{', ...' if len(shown) > 5 else ''}"

    def to_json(self) -> dict[str, Any]:
        return {"reference": str(self.reference.path), "wheel": str(self.wheel), "sha256": self.sha256,
                "size": self.size, "reference_sha256": self.reference.wheel_sha256,
                "reference_size": self.reference.wheel_size, "identical": self.identical, "verdict": self.kind,
                "members": self.members, "summary": self.summary()}


def compare_wheel(ref: Reference, wheel: str | Path) -> WheelVerdict:
    """The wheel against the reference: the whole file's sha256, then member by member."""
    wheel = inputfiles.regular_file(wheel, "wheel", "pass a wheel file")
    verdict = WheelVerdict(ref, wheel, sha256_file(wheel), wheel.stat().st_size)
    if verdict.identical:
        return verdict
    with wheelzip.open_zip(wheel) as zf:
        infos = {i.filename: i for i in zf.infolist() if not i.is_dir()}
        for name in sorted(set(ref.members) - set(infos)):
            verdict.members.append({"name": name, "class": ONLY_REFERENCE, "detail": "missing from this wheel"})
        for name, info in sorted(infos.items()):
            if name.endswith(".dist-info/RECORD"):
                continue
            if name not in ref.members:
                verdict.members.append({"name": name, "class": ONLY_HERE, "detail": f"{info.file_size} bytes"})
            elif wheeldiff.member_digest(zf, info, wheel) != ref.members[name]:
                verdict.members.append(_member_difference(ref, zf, info))
    if any(m["class"] != RECORD for m in verdict.members):
        verdict.members.append({"name": "*.dist-info/RECORD", "class": RECORD, "detail": "follows from the members above"})
    return verdict


def _member_difference(ref: Reference, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> dict[str, Any]:
    name = info.filename
    if name == BUILD_RECORD_MEMBER:
        try:
            theirs = json.loads(wheelzip.read_member(zf, info, zf.filename or "the wheel"))
        except (ValueError, UnicodeDecodeError):
            return {"name": name, "class": OTHER, "detail": "not a JSON build record"}
        diffs = record_differences(ref.build_record, theirs)
        detail = "; ".join(d.line() for d in diffs[:4]) + ("; ..." if len(diffs) > 4 else "")
        return {"name": name, "class": BUILD_RECORD, "detail": detail or "same values, other bytes"}
    if name in ref.compiled:
        return {"name": name, "class": COMPILED,
                "detail": f"{info.file_size} bytes, reference {ref.compiled[name].get('size')} bytes"}
    return {"name": name, "class": OTHER, "detail": f"{info.file_size} bytes"}
