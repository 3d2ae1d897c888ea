"""The SGLang service section of `blackwell-stack plan`: one per stack shown.

A stack's service is its first profile on the SGLang and flashinfer of its lock (`serve render --stack NAME`); a
stack without a lock falls back to the profile's own runtime block, and says so.
"""

from __future__ import annotations

from blackwell_stack.data.plan import PlanItem, PlanSection
from blackwell_stack.data.stack import Stack
from blackwell_stack.errors import StackError
from blackwell_stack.serve.service import command_line, configure


def plan_section(stack: Stack, key: str) -> PlanSection:
    """The service of `stack`: its first profile on its lock's versions."""
    section = PlanSection(key=key, title=f"SGLang service (stack {stack.name})")
    try:  # with no lock to read versions from, the profile's own runtime block (said so in the runtime's source)
        service = configure(stack=stack) if stack.locked else configure(stack.profiles[0])
    except StackError as exc:
        section.items.append(PlanItem("profile", "unreadable", verified=False, note=str(exc)))
        return section
    profile, table, runtime = service.profile, service.table, service.runtime
    model = profile.data["model"]
    section.items += [
        PlanItem("profile", profile.name, source=str(profile.path.name)),
        PlanItem("model", f"{model['id']}@{model['revision'] or '(revision not pinned)'}", source="profile model",
                 verified=bool(model.get("revision_verified")),
                 note=None if model.get("revision_verified") else model.get("revision_reason")),
        PlanItem("flag table", f"sglang {table.data['sglang_version']} ({len(table.data['flags'])} flags)",
                 source=f"{table.data['wheel']['filename']} sha256 {table.data['wheel']['sha256']}"),
        PlanItem("runtime", f"sglang {runtime.sglang}, flashinfer {runtime.flashinfer}",
                 source=runtime.source + ("" if stack.locked else
                                          f"; the {stack.name} stack has no lock yet (`{stack.lock_command}`)")),
        PlanItem("service command", command_line(service.rendered),
                 source="lib/sglang-service.nix render = serve/render.py"),
    ]
    for name, reason in profile.unverified():
        spec = profile.data["flags"].get(name) or profile.data["env"].get(name, {})
        section.items.append(PlanItem(f"profile {name}", str(spec.get("value")), source=spec.get("source"),
                                      verified=False, note=reason))
    section.items += [PlanItem(f"rule {v.id}", v.severity, source=v.source, verified=v.severity != "error",
                               note="; ".join(v.messages)) for v in service.verdicts if v.fired]
    where = f" --stack {stack.name}" if stack.locked else ""
    section.commands += [
        f"blackwell-stack serve render{where}",
        f"blackwell-stack serve check{where}",
        f"blackwell-stack serve run{where} --dry-run",
    ]
    return section
