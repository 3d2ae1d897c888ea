"""The serving profile (modules/profiles/*.json): model, hardware, flags, env.

Nix reads the same file (lib/sglang-service.nix); this module loads it and
says exactly which entry and field are wrong when it is malformed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack.errors import DataError, StackError
from blackwell_stack.paths import data_path

DEFAULT_PROFILE = "qwen3.5-397b-a17b-nvfp4-sm120"
PROFILES_DIR = ("modules", "profiles")
RULES_FILE = ("modules", "rules.json")

_REQUIRED = {
    "model": ("id", "revision", "kv_cache_scales_calibrated", "uses_mla"),
    "hardware": ("gpus", "compute_capability", "interconnect"),
    "runtime": ("sglang", "flashinfer"),
    "service": ("host", "port"),
}


@dataclass(frozen=True)
class Profile:
    path: Path
    data: dict[str, Any]

    @property
    def name(self) -> str:
        return self.data["name"]

    def flag_values(self) -> dict[str, Any]:
        return {flag: spec["value"] for flag, spec in self.data["flags"].items()}

    def env_values(self) -> dict[str, str]:
        return {name: spec["value"] for name, spec in self.data["env"].items()}


def profile_path(name_or_path: str | None) -> Path:
    if not name_or_path:
        name_or_path = DEFAULT_PROFILE
    candidate = Path(name_or_path)
    if candidate.suffix == ".json" or "/" in name_or_path:
        return candidate
    return data_path(*PROFILES_DIR, f"{name_or_path}.json")


def available_profiles() -> list[str]:
    return sorted(p.stem for p in data_path(*PROFILES_DIR).glob("*.json"))


def load_profile(name_or_path: str | None = None) -> Profile:
    path = profile_path(name_or_path)
    if not path.is_file():
        raise StackError(  # a name the user gave: a usage error, not malformed data
            f"{path}: no such profile",
            f"use one of: {', '.join(available_profiles())}, or pass a path to a profile JSON file",
        )
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(path, None, None, f"not valid JSON: {exc}") from exc
    _validate(path, data)
    return Profile(path, data)


def _validate(path: Path, data: Any) -> None:
    if not isinstance(data, dict):
        raise DataError(path, None, None, "a profile is a JSON object")
    for key in ("name", "model", "hardware", "runtime", "service", "flags", "env"):
        if key not in data:
            raise DataError(path, None, key, "missing", "see modules/profiles/qwen3.5-397b-a17b-nvfp4-sm120.json")
    for section, fields in _REQUIRED.items():
        for field in fields:
            if field not in data[section]:
                raise DataError(path, section, field, "missing")
    if not isinstance(data["hardware"]["gpus"], int) or data["hardware"]["gpus"] < 1:
        raise DataError(path, "hardware", "gpus", f"must be a positive integer, got {data['hardware']['gpus']!r}")
    for flag, spec in data["flags"].items():
        if not flag.startswith("--"):
            raise DataError(path, f"flags.{flag}", None, "flag names start with --", f"write it as --{flag}")
        for field in ("value", "reason", "source"):
            if not isinstance(spec, dict) or field not in spec:
                raise DataError(path, f"flags.{flag}", field, "missing", "every flag has a value, a reason and a source")
    for name, spec in data["env"].items():
        for field in ("value", "reason", "source"):
            if not isinstance(spec, dict) or field not in spec:
                raise DataError(path, f"env.{name}", field, "missing", "every variable has a value, a reason and a source")
        if not isinstance(spec["value"], str):
            raise DataError(path, f"env.{name}", "value", "environment values are strings")


def load_rules(path: Path | None = None) -> dict[str, Any]:
    path = Path(path) if path else data_path(*RULES_FILE)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise DataError(path, None, None, "the rules file is missing") from exc
    except json.JSONDecodeError as exc:
        raise DataError(path, None, None, f"not valid JSON: {exc}") from exc
    seen = set()
    for i, rule in enumerate(data.get("rules", [])):
        rid = rule.get("id") or f"#{i}"
        for field in ("id", "severity", "message", "source"):
            if field not in rule:
                raise DataError(path, rid, field, "missing")
        if rule["severity"] not in ("error", "warning"):
            raise DataError(path, rid, "severity", f"must be error or warning, got {rule['severity']!r}")
        if ("condition" in rule) == ("check" in rule):
            raise DataError(path, rid, "condition", "a rule has exactly one of condition or check")
        if rid in seen:
            raise DataError(path, rid, "id", "duplicate rule id")
        seen.add(rid)
    return data
