"""Tables a person can read, and JSON for machines."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO | None = None, *,
          max_width: int | None = None) -> None:
    """Print rows under headers, columns padded to their widest cell.

    With max_width, longer cells are cut with an ellipsis (`--json` keeps the
    whole text).
    """
    out = out or sys.stdout
    cells = [[_clip(_cell(c), max_width) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    print(line.rstrip(), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip(), file=out)


def _clip(text: str, max_width: int | None) -> str:
    if max_width is None or len(text) <= max_width:
        return text
    return text[: max_width - 1] + "…"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def heading(title: str, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    print(f"\n== {title} ==", file=out)


def dump_json(data: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    json.dump(data, out, indent=2, sort_keys=False, default=str)
    out.write("\n")
