"""The pinned-inputs section of `blackwell-stack plan`: what every stack builds on
(flake inputs, sgl-kernel's sources). Each stack's own pins are in its section
(blackwell_stack.stacks.plan)."""

from __future__ import annotations

from blackwell_stack.data.plan import PlanItem, PlanSection, hash_checked_by
from blackwell_stack.data.stack import Stack
from blackwell_stack.pins import inventory


def plan_section(stacks: list[Stack]) -> PlanSection:
    """One section whatever the stacks: what they all build on."""
    items = [PlanItem("CUDA toolkit", "cudaPackages_13_0 (13.0.x at the locked nixpkgs)",
                      source="nix/cuda-home.nix and pkgs/sgl-kernel (asserted to be 13.0 at evaluation)")]
    items += [PlanItem(r.what, r.version or "-", source=r.hash_source if r.verified else r.file, verified=r.verified,
                       note=None if r.verified else f"{r.reason}. Fill it in with: "
                       f"{r.update_command or 'see ' + r.file}", checked_by=hash_checked_by(r.hash_checked))
              for r in inventory.shared_pins()]
    return PlanSection(key="pins", title="Pinned inputs", items=items, commands=["blackwell-stack pins show"])
