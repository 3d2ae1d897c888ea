"""`blackwell-stack plan`: the whole pinned stack for the default target.

Runs anywhere (no GPU, no Nix): it reads the data files and prints what would
be built and deployed, calling out every pin that is not verified.
"""

from __future__ import annotations

import argparse
import importlib

from blackwell_stack import output
from blackwell_stack.plan_model import PlanSection

PLAN_VERSION = 1
# Table cells longer than this are cut in the human output; --json has them whole.
CELL_WIDTH = 72

# Order of the sections in the plan; each module has plan_section().
SECTION_MODULES = (
    "blackwell_stack.pins.plan",
    "blackwell_stack.kernel.plan",
    "blackwell_stack.serve.plan",
    "blackwell_stack.doctor.plan",
    "blackwell_stack.verify.plan",
)


def sections(stacks: list[str] | None = None) -> list[PlanSection]:
    """The plan's sections: pinned inputs, one section per stack asked for (default: the default stack), the rest.

    A module with `plan_sections(stacks)` gives one section per stack (the SGLang service).
    """
    from blackwell_stack.stacks import model
    from blackwell_stack.stacks import plan as stack_plan

    chosen = stacks or [model.default_name()]
    secs: list[PlanSection] = []
    for name in SECTION_MODULES:
        module = importlib.import_module(name)
        secs += module.plan_sections(chosen) if hasattr(module, "plan_sections") else [module.plan_section()]
    return secs[:1] + [stack_plan.plan_section(name) for name in chosen] + secs[1:]


def stack_names(arg: str | None) -> list[str]:
    """--stack NAME (or `all`) as a list of stacks."""
    from blackwell_stack.stacks import model

    if arg is None:
        return [model.default_name()]
    if arg == "all":
        return model.names()
    return [model.load(arg).name]


def build_plan(stacks: list[str] | None = None) -> dict:
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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    plan = build_plan(stack_names(args.stack))
    if args.json:
        output.dump_json(plan)
        return 0
    print(f"blackwell-stack plan: {plan['target']}")
    for sec in plan["sections"].values():
        output.heading(sec["title"])
        if sec["items"]:
            output.table(
                ["item", "value", "source", "verified"],
                [[i["name"], i["value"], i["source"], i["verified"]] for i in sec["items"]],
                max_width=CELL_WIDTH,
            )
        for cmd in sec["commands"]:
            print(f"  $ {cmd}")
    print("\n(long cells are cut; `blackwell-stack plan --json` has every value and source whole)")
    output.heading("Unverified")
    if not plan["unverified"]:
        print("every pin is verified")
    for u in plan["unverified"]:
        print(f"  [{u['section']}] {u['name']}: {u['note']}")
    return 0
