"""One SGLang service configuration: a profile on a runtime, rendered and checked.

The flag table and the rules are chosen by the runtime's SGLang version, so a stack only has to pass the versions of
its lock:

    current = stack_data.load("current")
    configure(stack=current)                       # its first profile, its lock's versions
    configure("qwen3.5-397b-a17b-nvfp4-v2-sm120-current", stack=current)

(lib/sglang-service.nix: `render { profile; runtime = { sglang; flashinfer; }; }`; the NixOS module's
services.sglang.stack). Without a stack, the profile's own runtime block is used. A profile is served on a stack
only if it is made for it: its `stacks` list names it, or (a profile without that list) its runtime block is the
stack's locked versions; the NixOS module refuses the same pairs (modules/sglang.nix).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack.data import stack as stack_data
from blackwell_stack.data.profile import Profile, Runtime, load_profile, load_rules
from blackwell_stack.data.stack import Stack
from blackwell_stack.errors import StackError
from blackwell_stack.serve import secrets
from blackwell_stack.serve.flags import FlagTable, load_table
from blackwell_stack.serve.render import Rendered, parse_set, render
from blackwell_stack.serve.rules import Verdict, evaluate


@dataclass
class Service:
    profile: Profile
    runtime: Runtime
    table: FlagTable
    rendered: Rendered
    verdicts: list[Verdict]

    def fired(self, severity: str) -> list[Verdict]:
        return [v for v in self.verdicts if v.fired and v.severity == severity]


def check_profile_fits_stack(profile: Profile, stack: Stack, runtime: Runtime) -> None:
    """StackError naming the fix unless `profile` is made for `stack` (whose lock holds `runtime`)."""
    name = stack.name
    own = profile.runtime()
    if name in profile.stacks or (not profile.stacks and (own.sglang, own.flashinfer) == (runtime.sglang,
                                                                                         runtime.flashinfer)):
        return
    # The stacks to name in the hint: every stack, this one as it was resolved (its lock is parsed once).
    stacks = {n: stack if n == name else stack_data.load(n) for n in stack_data.names()}
    if profile.stacks:
        made_for = f"the stacks {', '.join(profile.stacks)}"
        others = [s for s in profile.stacks if s in stacks and stacks[s].locked]
    else:
        made_for = f"sglang {own.sglang}, flashinfer {own.flashinfer}"
        others = [s for s, st in stacks.items() if st.locked and st.versions()["sglang"] == own.sglang]
    raise StackError(
        f"profile {profile.name} is not made for the {name} stack (sglang {runtime.sglang}, flashinfer "
        f"{runtime.flashinfer}); it is for {made_for}",
        (f"pass --stack {others[0]}, or " if others else "pass ")
        + f"--profile with one of the {name} stack's profiles: {', '.join(stack.profiles)}",
    )


def configure(profile: str | None = None, *, stack: Stack | None = None, settings: list[str] | None = None,
              overrides: dict[str, Any] | None = None, extra_args: list[str] | None = None,
              env_overrides: dict[str, str | None] | None = None, table_path: Path | None = None) -> Service:
    """Render `profile` (name or path) with `--set` style settings and extraArgs, and evaluate every rule.

    stack: serve on that stack, whose lock gives the runtime and whose first profile is the default; a profile
    of another stack is refused. table_path replaces the runtime's flag table (its version then not checked).
    """
    prof = load_profile(stack.profiles[0] if stack is not None and profile is None else profile)
    if stack is not None:
        versions = stack.versions()  # a StackError with the lock command when it has no lock
        rt = Runtime(versions["sglang"], versions["flashinfer"], f"{stack.relpath}/uv.lock")
        check_profile_fits_stack(prof, stack, rt)
    else:
        rt = prof.runtime()
    table = load_table(path=table_path) if table_path else load_table(rt.sglang)
    rules = load_rules()
    chosen = {**parse_set(settings or [], table), **(overrides or {})}  # overrides: values as Nix gives them
    rendered = render(prof, table, rules, chosen, extra_args, env_overrides, runtime=rt)
    verdicts = [*evaluate(rendered, rules, table.data), secrets.verdict(rendered, table.data)]
    return Service(prof, rt, table, rendered, verdicts)


def command_line(rendered: Rendered, python: str = "python") -> str:
    """The service's command as one shell line: its environment, then `python -m sglang.launch_server ARGV`."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in rendered.env.items())
    cmd = shlex.join([python, "-m", "sglang.launch_server", *rendered.argv])
    return f"{env} {cmd}".strip()
