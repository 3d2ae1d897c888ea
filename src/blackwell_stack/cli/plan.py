"""`blackwell-stack plan`: the whole pinned stack for the default target.

Runs anywhere (no GPU, no Nix): it reads the data files and prints what would
be built and deployed, calling out every pin that is not verified.
"""

from __future__ import annotations

import argparse

from blackwell_stack import output
from blackwell_stack.cli import areas
from blackwell_stack.model import stack as model_stack
from blackwell_stack.model.plan import PlanSection
from blackwell_stack.model.stack import Stack

PLAN_VERSION = 1

def sections(stacks: list[Stack] | None = None) -> list[PlanSection]:
    """The plan's sections, in the order of cli/areas.py: pinned inputs, one section per stack asked for
    (default: the default stack), then each area's part for those stacks."""
    chosen = stacks or model_stack.select(None)
    return [section for part in areas.PLAN_SECTIONS for section in part(chosen)]


def build_plan(stacks: list[Stack] | None = None) -> dict:
    secs = sections(stacks)
    unverified = [
        {"section": s.key, "name": i.name, "note": i.note} for s in secs for i in s.items if not i.verified
    ]
    return {
        "plan_version": PLAN_VERSION,
        "target": "Qwen3.5-397B-A17B-NVFP4 on 8x RTX PRO 6000 Blackwell (SM120), CUDA 13.0",
        "sections": {s.key: s.to_json() for s in secs},
        "unverified": unverified,
    }


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="show the whole pinned stack for the default target (the main job)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--stack", default=None, metavar="NAME",
                   help="the serving stack to show (default: the default stack; `all` for every stack)")
    p.add_argument("--wide", action="store_true", help="print table rows whole instead of fitting them to the terminal")
    p.set_defaults(func=run)


def checked_cell(item: dict) -> str:
    """The `checked` column: NO for an unverified value, else what checked it ('-': no claim beyond the source)."""
    if not item["verified"]:
        return "NO (unverified)"
    return item.get("checked_by") or "-"


def run(args: argparse.Namespace) -> int:
    plan = build_plan(model_stack.select(args.stack))
    if args.json:
        output.dump_json(plan)
        return 0
    output.paragraph(f"blackwell-stack plan: {plan['target']}")
    for sec in plan["sections"].values():
        output.heading(sec["title"])
        shown = [i for i in sec["items"] if args.wide or not i.get("detail")]
        if shown:
            output.table(
                ["item", "value", "source", "checked"],
                [[i["name"], i["value"], i["source"], checked_cell(i)] for i in shown],
            )
        hidden = len(sec["items"]) - len(shown)
        if hidden:
            output.paragraph(f"({hidden} more rows, one per locked file: `plan --wide` or `plan --json` lists them)",
                             indent="  ")
        for cmd in sec["commands"]:
            print(f"  $ {cmd}")
    output.heading("Unverified")
    if not plan["unverified"]:
        print("every pin is verified")
    for u in plan["unverified"]:
        output.paragraph(f"[{u['section']}] {u['name']}: {u['note']}", indent="  ")
    print()
    output.paragraph("checked: what checked a value on this project's machines (a hash computed here, PyPI's own "
                     "sha256); 'not checked here' is a value only its source vouches for, or one that needs the GPU "
                     "host (`blackwell-stack doctor` checks that there). `plan --json` has every value whole.")
    return 0
