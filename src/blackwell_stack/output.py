"""Tables a person can read, JSON for machines, and a stdout that survives a closed pipe.

A table fits the terminal: when its rows are wider than the terminal, the
widest columns get narrower and their cells wrap onto continuation lines, so
nothing is cut. `--wide` (or output that goes to a pipe or a file, where no
terminal width applies) prints every row whole on one line; `--json` has
every value whole too.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import textwrap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TextIO

# Set by the CLI's --wide: print table rows whole, whatever the terminal width.
_wide = False
# A column is never wrapped narrower than this (the terminal may then be overrun).
MIN_COLUMN = 8
_SEP = "  "


def set_wide(on: bool) -> None:
    global _wide
    _wide = on


def terminal_width(out: TextIO | None = None) -> int | None:
    """Columns to fit tables into: $COLUMNS, else the terminal's width; None for pipes and files."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    stream = out or sys.stdout
    try:
        if stream.isatty():
            return shutil.get_terminal_size().columns
    except (AttributeError, ValueError, OSError):
        pass
    return None


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO | None = None, *,
          max_width: int | None = None, wide: bool | None = None) -> None:
    """Print rows under headers, columns padded to their widest cell, fitted to the terminal.

    max_width cuts longer cells with an ellipsis (for one-line summaries);
    wide (default: the CLI's --wide) prints rows whole without fitting.
    """
    out = out or sys.stdout
    cells = [[_clip(_cell(c), max_width) for c in row] for row in rows]
    natural = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            natural[i] = max(natural[i], max((len(part) for part in c.split("\n")), default=0))
    width = None if (_wide if wide is None else wide) else terminal_width(out)
    widths = fit_widths(natural, width) if width else natural
    _print_row(list(headers), widths, out)
    print(_SEP.join("-" * w for w in widths), file=out)
    for row in cells:
        _print_row(row, widths, out)


def grouped_rows(members: Iterable[Mapping[str, Any]], most: int = 3) -> list[list[str]]:
    """Rows of (name, class, detail) for a table; a difference shared by more than `most` members
    becomes one row that names the first and counts the rest."""
    groups: dict[tuple[str, str], list[str]] = {}
    for m in members:
        groups.setdefault((m["class"], m["detail"]), []).append(m["name"])
    rows = []
    for (cls, detail), names in groups.items():
        if len(names) > most:
            rows.append([f"{names[0]} and {len(names) - 1} more", cls, detail])
        else:
            rows.extend([n, cls, detail] for n in names)
    return rows


def fit_widths(natural: Sequence[int], total: int) -> list[int]:
    """Column widths that fit `total` characters: narrow columns keep their width, wide ones share the rest."""
    n = len(natural)
    room = total - len(_SEP) * (n - 1)
    if sum(natural) <= room:
        return list(natural)
    widths = list(natural)
    flexible = set(range(n))
    left = room
    while flexible:
        share = left // len(flexible)
        keep = [i for i in flexible if natural[i] <= share]
        if not keep:
            break
        for i in keep:
            flexible.discard(i)
            left -= natural[i]
    if flexible:
        share, extra = divmod(max(left, 0), len(flexible))
        for k, i in enumerate(sorted(flexible)):
            widths[i] = max(min(natural[i], MIN_COLUMN), share + (1 if k < extra else 0))
    return widths


def _print_row(row: Sequence[str], widths: Sequence[int], out: TextIO) -> None:
    wrapped = [_wrap(c, w) for c, w in zip(row, widths)]
    height = max((len(lines) for lines in wrapped), default=1)
    for k in range(height):
        parts = [(lines[k] if k < len(lines) else "").ljust(w) for lines, w in zip(wrapped, widths)]
        print(_SEP.join(parts).rstrip(), file=out)


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for part in text.split("\n"):
        if len(part) <= width:
            lines.append(part)
        else:
            lines.extend(textwrap.wrap(part, width, break_long_words=True, break_on_hyphens=False) or [""])
    return lines or [""]


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


def paragraph(text: str, out: TextIO | None = None, *, indent: str = "") -> None:
    """Prose wrapped to the terminal (continuation lines indented two more spaces); whole with --wide or in a pipe."""
    out = out or sys.stdout
    width = None if _wide else terminal_width(out)
    if width is None:
        print(indent + text, file=out)
        return
    print(textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                        break_long_words=True, break_on_hyphens=False), file=out)


def heading(title: str, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    print(file=out)
    paragraph(f"== {title} ==", out)


def dump_json(data: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    json.dump(data, out, indent=2, sort_keys=False, default=str)
    out.write("\n")


class _PipeGuard(io.TextIOBase):
    """A text stream that, once its reader has gone (EPIPE), drops what is written instead of raising.

    The command then runs to its end and exits with its own code: a failing
    check piped into `head` still fails. The broken descriptor is pointed at
    /dev/null so that the interpreter's final flush does not fail either.
    """

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._break()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._break()

    def _break(self) -> None:
        self.broken = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> object:  # buffer, errors, ...: the wrapped stream's
        return getattr(self._stream, name)

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", "utf-8")


@contextlib.contextmanager
def pipe_safe_output() -> Iterator[None]:
    """stdout and stderr that survive a reader that closed the pipe early (see _PipeGuard)."""
    saved = sys.stdout, sys.stderr
    sys.stdout = _PipeGuard(saved[0])  # type: ignore[assignment]
    sys.stderr = _PipeGuard(saved[1])  # type: ignore[assignment]
    try:
        yield
    finally:
        for guard in (sys.stdout, sys.stderr):
            guard.flush()
        sys.stdout, sys.stderr = saved
