"""The serving profile (modules/profiles/*.json): model, hardware, flags, env.

Nix reads the same file (lib/sglang-service.nix); this module loads it and
says exactly which entry and field are wrong when it is malformed. A profile
names the stacks it is for; each of its flags and variables says whether it
is verified (and by what) or why not, so that `plan` and `serve check` can
show it.

The rules hold against a Runtime (the SGLang and flashinfer versions). Until
a stack supplies the versions of its lock, it is the profile's runtime block.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack import inputfiles
from blackwell_stack.data import registry, versions
from blackwell_stack.errors import DataError, StackError

DEFAULT_PROFILE = "qwen3.5-397b-a17b-nvfp4-sm120"
# The runtime components a rule may state versions for (Runtime's fields).
RUNTIME_COMPONENTS = ("sglang", "flashinfer")


@dataclass(frozen=True)
class Runtime:
    """The versions the rules hold against (a stack passes the versions of its lock)."""

    sglang: str
    flashinfer: str | None = None
    source: str = "given by the caller"

    def __post_init__(self) -> None:
        for component in RUNTIME_COMPONENTS:
            value = getattr(self, component)
            if value is not None:
                try:
                    versions.parse(value)
                except StackError as exc:
                    raise StackError(f"runtime {component}: {exc.message}", exc.hint) from None

    def context(self) -> dict[str, str | None]:
        """What the rules see as `runtime` (lib/sglang-service.nix builds the same)."""
        return {"sglang": self.sglang, "flashinfer": self.flashinfer}


@dataclass(frozen=True)
class Profile:
    path: Path
    data: dict[str, Any]

    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def stacks(self) -> list[str]:
        return list(self.data.get("stacks", []))

    def runtime(self) -> Runtime:
        """The profile's own runtime block: the default until a stack supplies its versions."""
        block = self.data["runtime"]
        return Runtime(block["sglang"], block.get("flashinfer"), f"profile {self.name} runtime ({block.get('source', 'no source')})")

    def flag_values(self) -> dict[str, Any]:
        return {flag: spec["value"] for flag, spec in self.data["flags"].items()}

    def env_values(self) -> dict[str, str]:
        return {name: spec["value"] for name, spec in self.data["env"].items()}

    def unverified(self) -> list[tuple[str, str]]:
        """(flag or variable, why it is unverified) for every entry not marked verified."""
        out = []
        for kind in ("flags", "env"):
            for name, spec in sorted(self.data[kind].items()):
                if spec.get("verified") is not True:
                    out.append((name, spec.get("unverified_reason") or "not marked verified in the profile"))
        return out


def available_profiles() -> list[str]:
    return sorted(p.stem for p in registry.entry("profile").files())


def load_profile(name_or_path: str | None = None) -> Profile:
    """A profile by name (modules/profiles/<name>.json; the default when None) or by path (a .json, or with a /)."""
    name_or_path = name_or_path or DEFAULT_PROFILE
    is_path = Path(name_or_path).suffix == ".json" or "/" in name_or_path
    path = Path(name_or_path) if is_path else registry.path("profile", name_or_path)
    if path.exists() and not path.is_file():
        inputfiles.regular_file(path, "--profile")  # says what it is instead: a directory, a FIFO, a device
    if not path.is_file():
        raise StackError(  # a name the user gave: a usage error, not malformed data
            f"{path}: no such profile",
            f"use one of: {', '.join(available_profiles())}, or pass a path to a profile JSON file",
        )
    data = registry.load("profile", file=path, check=lambda data, file: _validate(file, data))
    return Profile(path, data)


def _validate(path: Path, data: Any) -> None:
    """Across a profile's fields (its shape is the registry's: data/schemas.py PROFILE)."""
    for component in RUNTIME_COMPONENTS:
        try:
            if data["runtime"][component] is not None:  # flashinfer may be null; the shape makes sglang a string
                versions.parse(data["runtime"][component])
        except StackError as exc:
            raise DataError(path, "runtime", component, exc.message, exc.hint) from None
    for name, spec in data["flags"].items():
        # A float in a flag's value (or its list): decimals are strings in a profile, so that SGLang's argv has one
        # rendering (Python's str(0.88) is 0.88, Nix's toString 0.880000, its toJSON varies with the Nix version).
        values = spec["value"] if isinstance(spec["value"], list) else [spec["value"]]
        decimal = next((v for v in values if isinstance(v, float)), None)
        if decimal is not None:
            raise DataError(path, f"flags.{name}", "value", f"is the number {decimal!r}: write a decimal as a string",
                            f'"value": "{decimal!r}" (Nix renders a float as {decimal:f}, and the NixOS module\'s '
                            "command line must be the one blackwell-stack renders)")
    for kind in ("flags", "env"):
        for name, spec in data[kind].items():
            need = "verified_by" if spec.get("verified") else "unverified_reason"
            if "verified" in spec and need not in spec:
                raise DataError(path, f"{kind}.{name}", need, "missing",
                                "say how it was verified (verified_by), or why it is not (unverified_reason)")


def load_rules(path: Path | None = None) -> dict[str, Any]:
    return registry.load("rules", file=path, check=_check_rules)


def _check_rules(data: dict[str, Any], path: Path) -> None:
    """Across each rule's fields (the file's shape is the registry's: data/schemas.py RULES)."""
    seen = set()
    for rule in data["rules"]:
        rid = rule["id"]
        if ("condition" in rule) == ("check" in rule):
            raise DataError(path, rid, "condition", "a rule has exactly one of condition or check")
        if rid in seen:
            raise DataError(path, rid, "id", "duplicate rule id")
        seen.add(rid)
        for component, sets in rule["versions"].items():
            where = f"versions.{component}"
            for kind in ("holds", "not"):
                for text in sets.get(kind, []):
                    try:
                        versions.specifiers(text)
                    except StackError as exc:
                        raise DataError(path, rid, f"{where}.{kind}", exc.message, exc.hint) from None
            for a in sets["holds"]:
                for b in sets.get("not", []):
                    if both := versions.overlap(a, b):
                        raise DataError(path, rid, where, f"{both} is both held ({a}) and not held ({b})")
