"""The NixOS module's build-time check: the configuration Nix rendered, held to the rules here.

services.sglang renders SGLang's argv from its options (lib/sglang-service.nix) and hands what it rendered
from to one derivation that runs `blackwell-stack serve check --profile P --module-config C`, as nixpkgs'
prometheus module runs `promtool check config`: the system's build depends on it, so a refused configuration fails
`nixos-rebuild` with these messages, each naming the option to change. The rules, the flag table and the
versions are decided here alone; Nix only renders. The argv rendered here must be the module's, so the
one step both sides still take is checked on every configuration that is built.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from blackwell_stack import inputfiles
from blackwell_stack.data import shape
from blackwell_stack.data.shape import AnyValue, ListOf, Map, Obj, Opt, Str
from blackwell_stack.errors import DataError, ExitCode
from blackwell_stack.serve.rules import Verdict
from blackwell_stack.serve.service import Service

HINT = "pass the file services.sglang writes (modules/sglang/check.nix)"
# What modules/sglang/check.nix writes (its `moduleConfig`).
MODULE_CONFIG = Obj({
    "overrides": Map(AnyValue()),
    "extraArgs": ListOf(Str()),
    "env": Map(Opt(Str())),
    "ignoredRules": ListOf(Str(nonempty=True)),
    "argv": ListOf(Str()),
})


def load(path: Path) -> dict[str, Any]:
    """The file, refused (exit 2: it is the caller's input) unless it is what the module writes."""
    raw = inputfiles.read_text(path, limit=inputfiles.DATA_FILE_LIMIT, what="--module-config")
    try:
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise DataError(path, None, None, f"is not valid JSON: {exc}", HINT) from None
        shape.check(MODULE_CONFIG, data, path, HINT)
    except DataError as exc:
        exc.code = ExitCode.USAGE
        raise
    return data


def verdict_text(v: Verdict) -> str:
    """As a NixOS assertion reads: the option, the rule, what fired, its source."""
    return (f"{v.option or 'services.sglang'}: [{v.id}] " + "; ".join(v.messages)
            + (f" (source: {v.source})" if v.source else ""))


def report(service: Service, config: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the module's configuration, as lines for the build log."""
    errors, warnings = [], []
    for v in service.verdicts:
        if not v.fired:
            continue
        if v.severity == "error" and v.id not in config["ignoredRules"]:
            errors.append(verdict_text(v))
        else:
            ignored = "ignored by services.sglang.ignoredRules: " if v.severity == "error" else ""
            warnings.append(ignored + verdict_text(v))
    if service.rendered.argv != config["argv"]:
        errors.append("services.sglang: the module rendered another command line than the checker: "
                      f"{config['argv']} against {service.rendered.argv}; report it with both")
    return errors, warnings
