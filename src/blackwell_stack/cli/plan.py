"""`blackwell-stack plan`: the whole pinned stack for the default target (the main job).

Runs anywhere (no GPU, no Nix): it reads the data files and says, first and in one screen, what each stack is (its
SGLang, flashinfer, torch and kernel), its verdict (ready to build, or blocked by what is unverified; how many
checks wait for the GPU host, how many values are not checked here) and the next command; then the sections of the
stack asked for, one line each. `plan SECTION` lists one section item by item, `--wide` every row of every section
whole, `--json` everything (plan_text.py prints; this module decides what there is to say).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import asdict

from blackwell_stack import output
from blackwell_stack.cli import areas, plan_text
from blackwell_stack.data import stack as stack_data
from blackwell_stack.data.plan import NEEDS_GPU_HOST, NOT_CHECKED_HERE, STANDINGS, UNVERIFIED, PlanSection, standing
from blackwell_stack.data.stack import Stack
from blackwell_stack.errors import StackError
from blackwell_stack.verify import acceptance_report

PLAN_VERSION = 1
TARGET = "Qwen3.5-397B-A17B-NVFP4 on 8x RTX PRO 6000 Blackwell (SM120), CUDA 13.0"
# The sections of the service's settings: an unverified one warns when the service starts, it stops no build.
SERVICE = "service"
BLOCKING = "blocking"
# `plan SECTION` also takes this: every unverified item with its note whole.
UNVERIFIED_SECTION = "unverified"


def sections(stacks: list[Stack], report: tuple[dict, str] | None) -> tuple[list[PlanSection], dict[str, str]]:
    """The plan's sections, in the order of cli/areas.py: pinned inputs, one section per stack, then each area's
    part for those stacks; the GPU host's items that the acceptance report (its data and sha256) verified,
    marked, and what it was refused for (section key -> why)."""
    found: list[PlanSection] = []
    for part in areas.PLAN_SECTIONS:
        if not isinstance(part, tuple):
            found += filter(None, [part(stacks)])
            continue
        # A section per stack: `X` when the plan shows one stack, else `X-<name>` (a stack's own always, so that
        # `plan stack-NAME` names one stack whichever is shown).
        key, section_of = part
        found += [section_of(stack, key if len(stacks) == 1 and key != "stack" else f"{key}-{stack.name}")
                  for stack in stacks]
    refused = acceptance_report.apply(*report, found, stacks) if report else []
    return found, {key: why for key, _, why in (line.partition(": ") for line in refused)}


def verdict_text(counts: dict[str, int]) -> str:
    """Broken apart from pending: `ready to build; 11 checks wait for the GPU host; 1 setting unverified before
    serving; 7 values not checked here`, or `blocked: 3 unverified items stop the build; ...`."""
    blocking = counts[BLOCKING]
    head = "ready to build" if not blocking else \
        f"blocked: {output.counted(blocking, 'unverified item')} stop{'s' if blocking == 1 else ''} the build"
    gpu = counts[NEEDS_GPU_HOST]
    parts = [f"{output.counted(gpu, 'check')} wait{'s' if gpu == 1 else ''} for the GPU host"]
    settings = counts[UNVERIFIED] - blocking
    if settings:
        parts.append(f"{output.counted(settings, 'setting')} {UNVERIFIED} before serving")
    parts.append(f"{output.counted(counts[NOT_CHECKED_HERE], 'value')} {NOT_CHECKED_HERE}")
    return f"{head}; {'; '.join(parts)}"


def what_it_is(stack: Stack) -> str:
    """Its SGLang, flashinfer, torch and kernel as its lock has them (the stack's description before it has one)."""
    if not stack.locked:
        return f"(no lock yet) {stack.data['description']}"
    versions, kernel = stack.versions(), stack.kernel
    built = "built from source" if kernel["from"] == "source" else "(wheel from the lock)"
    return (f"SGLang {versions['sglang']}, flashinfer {versions['flashinfer']}, torch {versions['torch']}, "
            f"{kernel['package']} {stack.kernel_version or '?'} {built}")


def summary(stack: Stack, secs: list[PlanSection]) -> dict:
    """The stack's verdict: how many items stand each way (data/plan.py's STANDINGS), and how many of the
    unverified stop the build (BLOCKING: those outside the service's settings, which only warn)."""
    standings = Counter(standing(asdict(i)) for s in secs for i in s.items)
    counts = {**{name: standings[name] for name in STANDINGS},
              BLOCKING: sum(not i.verified for s in secs if not s.key.startswith(SERVICE) for i in s.items)}
    return {
        "default": stack.default,
        "what": what_it_is(stack),
        "versions": stack.versions() if stack.locked else None,
        "counts": counts,
        "verdict": verdict_text(counts),
        # The one command that moves the stack forward: lock it, or build its environment.
        "next": stack.lock_command if not stack.locked else f"nix build .#{stack.env_attribute}",
    }


def build_plan(stacks: list[Stack], summarised: list[Stack], report_path: str | None) -> dict:
    """Every section of `stacks`, every unverified item, and the summary of each stack in `summarised`, with
    what the acceptance report at `report_path` verified."""
    report = acceptance_report.load(report_path) if report_path else None
    secs, refused = sections(stacks, report)
    by_name = {stack.name: summary(stack, secs if [s.name for s in stacks] == [stack.name] else
                                   sections([stack], report)[0]) for stack in summarised}
    found = {
        "plan_version": PLAN_VERSION, "target": TARGET, "stacks": by_name,
        "sections": {s.key: s.to_json() for s in secs},
        "unverified": [{"section": s.key, "name": i.name, "note": i.note} for s in secs for i in s.items
                       if not i.verified],
    }
    if report is not None:
        data, sha256 = report
        found["report"] = {
            "file": report_path, "sha256": sha256, **{key: data[key] for key in ("host", "date", "stack", "profile")},
            "refused": refused,
            "verified": sum((i.checked_by or "").startswith(acceptance_report.VERIFIED) for s in secs for i in s.items),
        }
    return found


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan", help="show the whole pinned stack for the default target (the main job)",
        description="Each stack's versions, verdict and next command, then the sections of the stack asked for. "
        "SECTION lists one section item by item (a section's key, or its first word: pins, stack, kernel, "
        f"service, doctor, verify; `{UNVERIFIED_SECTION}` for every unverified item whole); --wide prints every "
        "row of every section whole; --json has everything.",
    )
    p.add_argument("section", nargs="?", metavar="SECTION", help="one section, item by item")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--stack", default=None, metavar="NAME",
                   help="the serving stack to show (default: the default stack, with every stack's verdict; "
                   "`all` for every stack)")
    p.add_argument("--report", metavar="FILE", help="the report.json of `blackwell-stack acceptance`: the items "
                   "that wait for the GPU host and that its steps passed are shown verified (by that host, on that "
                   "date, with the report's sha256); refused for the stacks whose versions it is not of")
    p.set_defaults(func=run)


def _pick(plan: dict, name: str) -> list[str]:
    """The keys of the sections `plan SECTION` names: a key, or every key whose first word it is."""
    keys = list(plan["sections"])
    picked = [k for k in keys if k == name] or [k for k in keys if k.split("-", 1)[0] == name]
    if not picked:
        names = sorted({k.split("-", 1)[0] for k in keys} | set(keys) | {UNVERIFIED_SECTION})
        raise StackError(f"the plan has no section {name!r}", f"sections: {', '.join(names)}")
    return picked


def run(args: argparse.Namespace) -> int:
    # `plan stack-NAME` is that stack's own section, whichever stack is the default.
    named = (args.section or "").removeprefix("stack-") if (args.section or "").startswith("stack-") else None
    shown = stack_data.select(args.stack or (named if named in stack_data.names() else None))
    # The default answer gives every stack's verdict, the default stack's first.
    everyone = shown + [s for s in stack_data.select("all") if s.name != shown[0].name] if args.stack is None else shown
    plan = build_plan(shown, everyone, args.report)
    for key, why in plan.get("report", {}).get("refused", {}).items():
        print(f"warning: --report {args.report}: {key}: {why}", file=sys.stderr)
    if args.json:
        output.dump_json(plan if not args.section or args.section == UNVERIFIED_SECTION
                         else {**plan, "sections": {k: plan["sections"][k] for k in _pick(plan, args.section)}})
        return 0
    if args.section == UNVERIFIED_SECTION:
        plan_text.print_unverified(plan)
    elif args.section:
        plan_text.print_sections(plan, _pick(plan, args.section), wide=args.wide)
    elif args.wide:
        plan_text.print_everything(plan)
    else:
        plan_text.print_screen(plan, [s.name for s in shown])
    return 0
