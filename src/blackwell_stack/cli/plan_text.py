"""How `plan` reads in a terminal: the answer first and in one screen, the detail on request.

The default screen's lines are cut to the terminal with an ellipsis, never wrapped into tall cells; `plan SECTION`
gives each item as a short block wrapped at spaces, so that no hash or path is split; `plan --wide` every section
as a table, every row whole on one line, the locked files included; `plan unverified` every unverified item.
"""

from __future__ import annotations

import textwrap
from collections import Counter

from blackwell_stack import output
from blackwell_stack.data.plan import NEEDS_GPU_HOST, NOT_CHECKED_HERE, UNVERIFIED, checked_words, standing

LEGEND = (
    "checked: what checked a value on this project's machines (a hash computed here, PyPI's own sha256, a test on "
    "the real artifact); 'not checked here' is a value only its source vouches for; 'waits for the GPU host' is "
    "one only `blackwell-stack acceptance` there can check (`plan --report` reads its report); UNVERIFIED is one nothing vouches for "
    "yet. `plan --json` has every value whole."
)
# Where no terminal says how wide a line may be, `plan SECTION` wraps its prose at this many columns.
PROSE_WIDTH = 100
# The default screen lists this many unverified items, one line each (`plan unverified` has them all).
UNVERIFIED_LINES = 6
MORE = ("more: `plan SECTION` lists a section item by item ({sections}, unverified); `plan --wide` every row "
        "whole; `plan --json` everything; `plan --stack NAME|all` another stack")


def _block(text: str, width: int | None, indent: str = "", more: str = "    ") -> None:
    """Prose wrapped at spaces (a word longer than the line is left whole), later lines indented by `more`."""
    print(textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent + more, break_long_words=False,
                        break_on_hyphens=False) if width else indent + text)


def _stacks(plan: dict, width: int | None) -> None:
    for name, s in plan["stacks"].items():
        _block(f"{name}{' (default)' if s['default'] else ''}: {s['what']}", width)
        _block(s["verdict"], width, indent="  ", more="  ")
        print(output.clip(f"  next: {s['next']}", width))


def _section_counts(section: dict) -> str:
    standings = Counter(standing(item) for item in section["items"])
    counts = {kind: standings[kind] for kind in (UNVERIFIED, NEEDS_GPU_HOST, NOT_CHECKED_HERE)}
    rows = [i for i in section["items"] if not i["detail"]]
    files = len(section["items"]) - len(rows)
    parts = [output.counted(len(rows), "item") + (f" and {output.counted(files, 'locked file')}" if files else "")]
    parts += [f"{n} {kind}" if kind != NEEDS_GPU_HOST else f"{n} wait{'s' if n == 1 else ''} for the GPU host"
              for kind, n in counts.items() if n]
    return ", ".join(parts)


def print_screen(plan: dict, shown: list[str]) -> None:
    """The default answer: fits 40 lines of a 100-column terminal."""
    width = output.terminal_width()
    print(output.clip(f"blackwell-stack plan: {plan['target']}", width))
    if report := plan.get("report"):
        refused = f"; refused for {', '.join(report['refused'])}" if report["refused"] else ""
        _block(f"acceptance report {report['file']} ({report['host']}, {report['date'][:10]}, stack "
               f"{report['stack']}): {report['verified']} item(s) verified{refused}", width)
    print()
    _stacks(plan, width)
    print()
    print(output.clip(f"== {'stack ' + shown[0] if len(shown) == 1 else 'stacks ' + ', '.join(shown)}, section by "
                      "section ==", width))
    pad = max(len(key) for key in plan["sections"])
    for key, section in plan["sections"].items():
        counts = _section_counts(section)
        head = f"  {key:<{pad}}  "
        title = output.clip(section["title"], width and max(width - len(head) - len(counts) - 2, 12))
        print(output.clip(f"{head}{title}: {counts}", width))
    if plan["unverified"]:
        print()
        print(output.clip(f"== unverified ({len(plan['unverified'])}; `plan unverified` gives each in full) ==", width))
        for u in plan["unverified"][:UNVERIFIED_LINES]:
            print(output.clip(f"  [{u['section']}] {u['name']}: {' '.join((u['note'] or '').split())}", width))
        if len(plan["unverified"]) > UNVERIFIED_LINES:
            print(output.clip(f"  ... and {len(plan['unverified']) - UNVERIFIED_LINES} more", width))
    print()
    short = dict.fromkeys(key.split("-", 1)[0] for key in plan["sections"])
    _block(MORE.format(sections=", ".join(short)), width, more="  ")


def print_sections(plan: dict, keys: list[str], *, wide: bool) -> None:
    """`plan SECTION`: the sections named, item by item (as tables with --wide)."""
    if wide:
        for key in keys:
            _table(plan["sections"][key])
        return
    # Wrapped in a pipe too (at PROSE_WIDTH): a value is one item's prose, never a line of a thousand characters
    # (`--wide` and `--json` have each whole).
    width = output.terminal_width() or PROSE_WIDTH
    for key in keys:
        section = plan["sections"][key]
        _block(f"== {section['title']} ({key}) ==", width)
        rows = [i for i in section["items"] if not i["detail"]]
        for item in rows:
            _block(f"{item['name']}: {item['value']}", width)
            if not item["verified"]:
                _block(f"UNVERIFIED: {item['note']}", width, indent="    ", more="  ")
            if item["checked_by"]:
                _block(f"checked: {item['checked_by']}", width, indent="    ", more="  ")
            if item["source"]:
                _block(f"source: {item['source']}", width, indent="    ", more="  ")
        hidden = len(section["items"]) - len(rows)
        if hidden:
            _block(f"({hidden} more items, one per locked file: `plan {key} --wide` or `plan --json` lists them)",
                   width)
        for cmd in section["commands"]:
            print(f"  $ {cmd}")
        print()
    _block(LEGEND, width, more="  ")


def _table(section: dict) -> None:
    output.heading(section["title"])
    output.table(["item", "value", "source", "checked"],
                 [[i["name"], i["value"], i["source"], checked_words(i["verified"], i.get("checked_by"))]
                  for i in section["items"]])
    for cmd in section["commands"]:
        print(f"  $ {cmd}")


def print_everything(plan: dict) -> None:
    """`plan --wide`: the verdicts, then every section as a table with every row whole."""
    print(f"blackwell-stack plan: {plan['target']}\n")
    _stacks(plan, None)
    for section in plan["sections"].values():
        _table(section)
    print()
    print_unverified(plan)


def print_unverified(plan: dict) -> None:
    width = output.terminal_width()
    _block(f"== Unverified ({len(plan['unverified'])}) ==", width)
    if not plan["unverified"]:
        print("every pin is verified")
    for u in plan["unverified"]:
        _block(f"[{u['section']}] {u['name']}: {u['note']}", width, indent="  ")
    print()
    _block(LEGEND, width, more="  ")
