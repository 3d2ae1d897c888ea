"""The SGLang service section of `blackwell-stack plan`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from blackwell_stack.errors import StackError
from blackwell_stack.plan_model import PlanItem, PlanSection

if TYPE_CHECKING:
    from blackwell_stack.serve.profile import Runtime


def plan_section(profile_name: str | None = None, runtime: "Runtime | None" = None) -> PlanSection:
    """The service of `profile_name` (default profile) on `runtime` (default: the profile's runtime block)."""
    section = PlanSection(key="service", title="SGLang service")
    try:
        from blackwell_stack.serve.commands import command_line
        from blackwell_stack.serve.service import configure

        service = configure(profile_name, runtime=runtime)
    except StackError as exc:
        section.items.append(PlanItem("profile", "unreadable", verified=False, note=str(exc)))
        return section
    profile, table, rendered, verdicts = service.profile, service.table, service.rendered, service.verdicts

    model = profile.data["model"]
    section.items.append(PlanItem("profile", profile.name, source=str(profile.path.name)))
    section.items.append(
        PlanItem(
            "model",
            f"{model['id']}@{model['revision'] or '(revision not pinned)'}",
            source="profile model",
            verified=bool(model.get("revision_verified")),
            note=None if model.get("revision_verified") else model.get("revision_reason"),
        )
    )
    section.items.append(
        PlanItem("flag table", f"sglang {table.data['sglang_version']} ({len(table.flags)} flags)",
                 source=f"{table.data['wheel']['filename']} sha256 {table.data['wheel']['sha256']}")
    )
    section.items.append(
        PlanItem("runtime", f"sglang {service.runtime.sglang}, flashinfer {service.runtime.flashinfer}",
                 source=service.runtime.source)
    )
    section.items.append(PlanItem("service command", command_line(rendered), source="lib/sglang-service.nix render = serve/render.py"))
    for name, reason in profile.unverified():
        spec = profile.data["flags"].get(name) or profile.data["env"].get(name, {})
        section.items.append(PlanItem(f"profile {name}", str(spec.get("value")), source=spec.get("source"), verified=False, note=reason))
    for v in verdicts:
        if v.fired:
            section.items.append(
                PlanItem(f"rule {v.id}", v.severity, source=v.source, verified=v.severity != "error", note="; ".join(v.messages))
            )
    section.commands += [
        "blackwell-stack serve render",
        "blackwell-stack serve check",
        "blackwell-stack serve run --dry-run",
    ]
    return section
