"""The SGLang service section of `blackwell-stack plan`."""

from __future__ import annotations

from blackwell_stack.errors import StackError
from blackwell_stack.plan_model import PlanItem, PlanSection


def plan_section() -> PlanSection:
    section = PlanSection(key="service", title="SGLang service")
    try:
        from blackwell_stack.serve import flags as flagmod
        from blackwell_stack.serve.commands import command_line
        from blackwell_stack.serve.profile import load_profile, load_rules
        from blackwell_stack.serve.render import render
        from blackwell_stack.serve.rules import evaluate

        table = flagmod.load_table()
        rules = load_rules()
        profile = load_profile()
        rendered = render(profile, table, rules)
        verdicts = evaluate(rendered, rules, table.data)
    except StackError as exc:
        section.items.append(PlanItem("profile", "unreadable", verified=False, note=str(exc)))
        return section

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
    section.items.append(PlanItem("service command", command_line(rendered), source="lib/sglang-service.nix render = serve/render.py"))
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
