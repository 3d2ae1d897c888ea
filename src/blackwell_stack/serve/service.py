"""One SGLang service configuration: a profile on a runtime, rendered and checked.

The flag table and the rules are chosen by the runtime's SGLang version, so a
stack only has to pass the versions of its lock:

    configure("qwen3.5-397b-a17b-nvfp4-sm120",
              runtime=Runtime("0.5.23", "0.7.2", source="stacks/current/uv.lock"))

(lib/sglang-service.nix: `render { profile; runtime = { sglang; flashinfer; }; }`).
Without a runtime, the profile's own runtime block is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack.serve import secrets
from blackwell_stack.serve.flags import FlagTable, load_table
from blackwell_stack.serve.profile import Profile, Runtime, load_profile, load_rules
from blackwell_stack.serve.render import Rendered, parse_set, render
from blackwell_stack.serve.rules import Verdict, evaluate


@dataclass
class Service:
    profile: Profile
    runtime: Runtime
    table: FlagTable
    rules: dict[str, Any]
    rendered: Rendered
    verdicts: list[Verdict]

    def fired(self, severity: str) -> list[Verdict]:
        return [v for v in self.verdicts if v.fired and v.severity == severity]


def configure(
    profile: str | None = None,
    *,
    runtime: Runtime | None = None,
    settings: list[str] | None = None,
    extra_args: list[str] | None = None,
    env_overrides: dict[str, str | None] | None = None,
    table_path: Path | None = None,
) -> Service:
    """Render `profile` (name or path) with `--set` style settings and extraArgs, and evaluate every rule.

    table_path replaces the runtime's flag table (its version is then not checked).
    """
    prof = load_profile(profile)
    rt = runtime or prof.runtime()
    table = load_table(path=table_path) if table_path else load_table(rt.sglang)
    rules = load_rules()
    rendered = render(prof, table, rules, parse_set(settings or [], table), extra_args, env_overrides, runtime=rt)
    verdicts = [*evaluate(rendered, rules, table.data), secrets.verdict(rendered, table.data)]
    return Service(prof, rt, table, rules, rendered, verdicts)
