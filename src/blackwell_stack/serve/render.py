"""Profile + settings + extraArgs -> SGLang argv, environment and rule context.

The same steps, in the same order, are in lib/sglang-service.nix (`render`);
tests compare the two on the default profile and on generated ones:

1. settings: --model-path (model id), --revision (if pinned), --host,
   --port, then the profile's flags, then overrides (`--set`, NixOS options);
   every key is put in the flag table's primary spelling, so `--tp-size`
   overrides `--tensor-parallel-size`; a null value removes a flag.
2. argv: --model-path, --revision, then the other settings sorted by name;
   true renders the bare flag, false nothing (or --no-X for a flag that has
   one, argparse.BooleanOptionalAction), null nothing, a list one value each;
   then extraArgs verbatim, last, so that a user's flag wins (argparse keeps
   the last value) and nothing of the profile is silently dropped.
3. context for the rules: every flag at the pinned SGLang's default,
   overlaid by the settings and by extraArgs parsed with the flag table,
   under its primary spelling and each alias (so a rule may name
   --tensor-parallel-size whichever spelling a version makes primary); the
   runtime's versions (the profile's runtime block unless the caller passes
   the stack's).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from blackwell_stack.data.profile import Profile, Runtime
from blackwell_stack.errors import StackError
from blackwell_stack.serve.flags import FlagTable, canonical

# No leading zeros: the same pattern as lib/sglang-service.nix (whose fromJSON refuses them).
INT_RE = re.compile(r"^-?(0|[1-9][0-9]*)$")
# What pins a Hugging Face checkout: a full commit sha. A branch or tag (`main`, `v1.0`) moves; an abbreviated sha
# is not resolved by the Hub's revision argument.
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
# A JSON number, read by json.loads: no nan, no inf.
_NUMBER_RE = re.compile(r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$")
FIRST = ("--model-path", "--revision")


def normalize_key(key: str) -> str:
    return key if key.startswith("--") else f"--{key}"


def settings_of(profile: Profile, overrides: dict[str, Any], table: dict[str, Any]) -> dict[str, Any]:
    """Merged flag settings keyed by primary spelling (unknown flags keep their spelling)."""
    data = profile.data
    ordered: list[tuple[str, Any]] = [("--model-path", data["model"]["id"])]
    if data["model"].get("revision") is not None:
        ordered.append(("--revision", data["model"]["revision"]))
    ordered += [("--host", data["service"]["host"]), ("--port", data["service"]["port"])]
    # Sorted, as Nix walks attribute sets: the same order on both sides.
    ordered += sorted(profile.flag_values().items())
    ordered += [(normalize_key(k), v) for k, v in sorted(overrides.items())]
    settings: dict[str, Any] = {}
    for key, value in ordered:
        name = canonical(key, table)[0] or key
        if value is None:
            settings.pop(name, None)
        else:
            settings[name] = value
    return settings


def _value_strings(value: Any) -> list[str]:
    if isinstance(value, list):
        return [s for v in value for s in _value_strings(v)]
    if isinstance(value, bool):
        return ["true" if value else "false"]
    return [str(value)]


def render_argv(settings: dict[str, Any], extra_args: list[str], table: dict[str, Any]) -> list[str]:
    names = [n for n in FIRST if n in settings] + sorted(n for n in settings if n not in FIRST)
    argv: list[str] = []
    for name in names:
        value = settings[name]
        entry = table["flags"].get(name)
        takes = entry["takes_value"] if entry else ("none" if isinstance(value, bool) else "one")
        if takes == "none":
            if value is True:
                argv.append(name)
            elif value is False and entry and entry.get("negations"):
                argv.append(entry["negations"][0])
            elif value is not False:
                argv += [name, *_value_strings(value)]  # the flag-table rule reports it
        else:
            argv += [name, *_value_strings(value)]
    return argv + list(extra_args)


@dataclass
class ParsedArgs:
    """extraArgs read the way argparse would read them, for the rules."""

    values: dict[str, Any] = field(default_factory=dict)  # primary spelling -> value
    unknown: list[str] = field(default_factory=list)  # option strings SGLang does not accept
    ambiguous: list[tuple[str, list[str]]] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)  # values that follow no flag


def _typed(value: str, entry: dict[str, Any]) -> Any:
    if entry.get("type") == "int" and INT_RE.match(value):
        return int(value)
    if entry.get("type") == "float" and _NUMBER_RE.match(value):
        return json.loads(value)
    return value


def parse_extra_args(extra_args: list[str], table: dict[str, Any]) -> ParsedArgs:
    parsed = ParsedArgs()
    i, n = 0, len(extra_args)
    while i < n:
        token = extra_args[i]
        i += 1
        if not token.startswith("--"):
            parsed.stray.append(token)
            continue
        name, eq, inline = token.partition("=")
        primary, candidates = canonical(name, table)
        if primary is None:
            if candidates:
                parsed.ambiguous.append((name, candidates))
            else:
                parsed.unknown.append(name)
            # Its value, if any, belongs to it: do not report it as stray as well.
            if not eq and i < n and not extra_args[i].startswith("--"):
                i += 1
            continue
        entry = table["flags"][primary]
        takes = entry["takes_value"]
        if takes == "none":
            parsed.values[primary] = name not in table["negated"]  # a --no-X spelling stores False
            if eq:
                parsed.stray.append(token)
        elif eq:
            parsed.values[primary] = _typed(inline, entry)
        elif takes == "many":
            values = []
            while i < n and not extra_args[i].startswith("--"):
                values.append(extra_args[i])
                i += 1
            parsed.values[primary] = values
        elif i < n and not extra_args[i].startswith("--"):  # its one value (or the optional one, given)
            parsed.values[primary] = _typed(extra_args[i], entry)
            i += 1
        elif takes == "optional":
            parsed.values[primary] = True
        else:
            parsed.values[primary] = None
            parsed.stray.append(f"{name} (no value)")
    return parsed


def context_of(profile: Profile, settings: dict[str, Any], parsed: ParsedArgs, rules: dict[str, Any],
               table: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
    # A decimal is a string in a profile ("0.88", data/profile.py): the rules compare it as the number SGLang reads.
    typed = {name: _typed(value, table["flags"][name]) if isinstance(value, str) and name in table["flags"] else value
             for name, value in settings.items()}
    defaults = {name: entry["default"] for name, entry in table["flags"].items()}
    by_primary = {**defaults, **typed, **parsed.values}
    aliases = {alias: by_primary[name] for name, entry in table["flags"].items() for alias in entry["aliases"]}
    flags = {**by_primary, **aliases}
    model = dict(profile.data["model"])
    model_path = flags.get("--model-path")
    model["local"] = isinstance(model_path, str) and model_path.startswith("/")
    revision = flags.get("--revision")
    model["revision_is_commit"] = isinstance(revision, str) and bool(_COMMIT_RE.match(revision))
    return {
        "flags": flags,
        "hardware": profile.data["hardware"],
        "model": model,
        "runtime": runtime.context(),
        "constants": rules.get("constants", {}),
    }


@dataclass
class Rendered:
    profile: str
    argv: list[str]
    env: dict[str, str]
    settings: dict[str, Any]
    context: dict[str, Any]
    parsed: ParsedArgs


def render(profile: Profile, table: FlagTable, rules: dict[str, Any], overrides: dict[str, Any] | None = None,
           extra_args: list[str] | None = None, env_overrides: dict[str, str | None] | None = None,
           runtime: Runtime | None = None) -> Rendered:
    """runtime: the versions the rules hold against (default: the profile's runtime block)."""
    extra_args = list(extra_args or [])
    settings = settings_of(profile, overrides or {}, table.data)
    parsed = parse_extra_args(extra_args, table.data)
    env = {**profile.env_values(), **(env_overrides or {})}
    return Rendered(profile.name, render_argv(settings, extra_args, table.data),
                    {k: v for k, v in sorted(env.items()) if v is not None}, settings,
                    context_of(profile, settings, parsed, rules, table.data, runtime or profile.runtime()), parsed)


def parse_set(items: list[str], table: FlagTable) -> dict[str, Any]:
    """`--set key=value` pairs, typed by the flag table (int flags to int, true/false for switches)."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key:
            raise StackError(f"--set {item!r}: expected key=value", "for example --set attention-backend=triton")
        key = normalize_key(key.strip())
        primary, _ = canonical(key, table.data)
        entry = table.data["flags"].get(primary) if primary else None
        value: Any = raw
        if raw == "null":
            value = None
        elif entry is not None and entry["takes_value"] == "none":
            if raw not in ("true", "false"):
                raise StackError(f"--set {key}={raw}: {primary} is a switch", f"write --set {key.lstrip('-')}=true or =false")
            value = raw == "true"
        elif entry is not None and entry.get("type") in ("int", "float"):
            value = _typed(raw, entry)
        out[key] = value
    return out
