"""The pinned-inputs section of `blackwell-stack plan`."""

from __future__ import annotations

from blackwell_stack.pins import registry
from blackwell_stack.plan_model import PlanItem, PlanSection, hash_checked_by


def plan_section() -> PlanSection:
    items = []
    for r in registry.all_pins():
        value = r.version or "-"
        note = None if r.verified else f"{r.reason}. Fill it in with: {r.update_command or 'see ' + r.file}"
        items.append(PlanItem(r.what, value, source=r.hash_source if r.verified else r.file, verified=r.verified, note=note,
                              checked_by=hash_checked_by(r.hash_source)))
    items.insert(0, PlanItem("CUDA toolkit", "cudaPackages_13_0 (13.0.x at the locked nixpkgs)", source="overlays/cuda13.nix"))
    return PlanSection(
        key="pins",
        title="Pinned inputs",
        items=items,
        commands=["blackwell-stack pins show", "blackwell-stack pins update torch --date 20260307 --cuda cu130 --python 3.12"],
    )
