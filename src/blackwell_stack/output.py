"""Tables a person can read, JSON for machines, and a stdout that survives a closed pipe or a narrow encoding.

A table fits the terminal: when its rows are wider than the terminal, the widest columns get narrower and their
cells wrap at spaces, so nothing is cut and no word (a hash, a path) is split while every column can hold its
longest word. `--wide` (or a pipe or a file, where no terminal width applies) prints every row whole on one line.

The CLI's output streams never end it with a traceback: a reader that has gone (EPIPE), a stdout closed before
the CLI started (`>&-`), and text the terminal's encoding cannot show (`PYTHONIOENCODING=ascii`: written as
`\u2026` escapes) are all handled in `pipe_safe_output`.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import select
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TextIO

# Set by the CLI's --wide: print table rows whole, whatever the terminal width.
_wide = False
# A column is never wrapped narrower than this (the terminal may then be overrun).
MIN_COLUMN = 8
_SEP = "  "


def set_wide(on: bool) -> None:
    global _wide
    _wide = on


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """"1 distribution", "2 distributions": n and its noun, in the plural (`plural`, else noun + "s") unless n is 1."""
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


def terminal_width() -> int | None:
    """Columns to fit tables into: $COLUMNS, else the terminal's width; None with --wide, for pipes and files."""
    if _wide:
        return None
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    with contextlib.suppress(AttributeError, ValueError, OSError):
        if sys.stdout.isatty():
            return shutil.get_terminal_size().columns
    return None


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, max_width: int | None = None) -> None:
    """Print rows under headers, columns padded to their widest cell, fitted to the terminal (whole with --wide);
    max_width cuts longer cells with an ellipsis (for one-line summaries)."""
    cells = [[clip(_cell(c), max_width) for c in row] for row in rows]
    columns = list(itertools.zip_longest(headers, *cells, fillvalue=""))
    natural = [max(len(line) for cell in column for line in cell.split("\n")) for column in columns]
    longest_word = [max((len(word) for cell in column for word in cell.split()), default=0) for column in columns]
    width = terminal_width()
    widths = fit_widths(natural, width, longest_word) if width else natural
    _print_row(list(headers), widths)
    print(_SEP.join("-" * w for w in widths))
    for row in cells:
        _print_row(row, widths)


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


def fit_widths(natural: Sequence[int], total: int, longest_word: Sequence[int]) -> list[int]:
    """Column widths that fit `total` characters: narrow columns keep their width, wide ones share the rest; none
    narrower than its longest word while all fit (cells wrap at spaces), else than MIN_COLUMN (words split)."""
    room = total - len(_SEP) * (len(natural) - 1)
    if sum(natural) <= room:
        return list(natural)
    floors = [min(width, MIN_COLUMN) for width in natural]
    by_words = [min(width, max(floor, word)) for width, floor, word in zip(natural, floors, longest_word)]
    if sum(by_words) <= room:
        floors = by_words

    def widths_at(level: int) -> list[int]:
        return [max(floor, min(width, level)) for width, floor in zip(natural, floors)]

    # The highest common level that fits: every column gets min(its natural width, level), never below its floor.
    widths = widths_at(next((level for level in range(max(natural), 0, -1) if sum(widths_at(level)) <= room), 0))
    # What the level leaves over: a character more to each column short of its natural width, left to right.
    short = [i for i, width in enumerate(natural) if widths[i] < width]
    for i in short[:max(room - sum(widths), 0)]:
        widths[i] += 1
    return widths


def _print_row(row: Sequence[str], widths: Sequence[int]) -> None:
    wrapped = [_wrap(cell, width) for cell, width in zip(row, widths)]
    for line in itertools.zip_longest(*wrapped, fillvalue=""):
        print(_SEP.join(part.ljust(width) for part, width in zip(line, widths)).rstrip())


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for part in text.split("\n"):
        wrapped = textwrap.wrap(part, width, break_long_words=True, break_on_hyphens=False)
        lines.extend((wrapped or [""]) if len(part) > width else [part])
    return lines


def clip(text: str, max_width: int | None) -> str:
    """text cut to max_width characters (None: whole), the cut marked with '…' ('...' where stdout cannot write it)."""
    if max_width is None or len(text) <= max_width:
        return text
    mark = "…"
    try:
        mark.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        mark = "..."
    return text[: max(max_width - len(mark), 0)] + mark


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def paragraph(text: str, *, indent: str = "") -> None:
    """Prose wrapped to the terminal (continuation lines indented two more spaces); whole with --wide or in a pipe."""
    width = terminal_width()
    print(textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent + "  ", break_long_words=True,
                        break_on_hyphens=False) if width else indent + text)


def heading(title: str) -> None:
    print()
    paragraph(f"== {title} ==")


def dump_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


# Control characters other than newline, tab and carriage return (the progress bar's), written as escapes: a
# server's model name or a user's argument holding ESC sequences must not drive the terminal that shows it.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if chr(c) not in "\n\t\r"}


class _PipeGuard(io.TextIOBase):
    """A text stream that never ends the CLI with a traceback.

    Once its reader has gone (EPIPE) it drops what is written instead of raising: the command then runs to its
    end and exits with its own code (a failing check piped into `head` still fails), and the broken descriptor
    is pointed at /dev/null so that the interpreter's final flush does not fail either. Any other write error (a
    full disk, EIO) loses output the reader is still waiting for: it is kept in `failure`, and the CLI then fails
    with it. A stream closed before the CLI started (None) is broken from the start. Characters its encoding
    cannot write, and control characters (ESC, BEL, ...), are written as backslash escapes.
    """

    def __init__(self, stream: TextIO | None):
        self._stream = stream
        self.broken = stream is None
        self.failure: OSError | None = None
        try:  # the descriptor under stream when it is non-blocking (O_NONBLOCK, shared with whoever opened it)
            fd = stream.fileno() if stream is not None else None
            self._nonblocking_fd = fd if fd is not None and not os.get_blocking(fd) else None
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            self._nonblocking_fd = None

    def write(self, text: str) -> int:
        self._guarded(lambda stream: self._write(stream, text.translate(_CONTROLS)))
        return len(text)

    def flush(self) -> None:
        self._guarded(lambda stream: stream.flush())

    def _guarded(self, action: Callable[[TextIO], object]) -> None:
        """action on the stream unless it is broken: a reader that has gone breaks it, another error fails it."""
        if self.broken or self._stream is None:
            return
        try:
            action(self._stream)
        except BrokenPipeError:
            self._break()
        except OSError as exc:
            self.failure = self.failure or exc
            self._break()
        except ValueError:  # a descriptor closed under us: nothing more can be written there
            self.broken = True

    def _write(self, stream: TextIO, text: str) -> None:
        if self._nonblocking_fd is None:
            try:
                stream.write(text)
            except UnicodeEncodeError:
                stream.write(text.encode(self.encoding, "backslashreplace").decode(self.encoding))
            return
        # Bytes written here, waiting where a write would block (EAGAIN) until the reader has read: a text stream
        # over a non-blocking descriptor would drop the rest, or write it twice after a partial write.
        stream.flush()
        view = memoryview(text.encode(self.encoding, "backslashreplace"))
        while view:
            try:
                view = view[os.write(self._nonblocking_fd, view):]
            except BlockingIOError:
                select.select([], [self._nonblocking_fd], [])

    def _break(self) -> None:
        self.broken = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> object:  # buffer, errors, ...: the wrapped stream's
        return getattr(self._stream, name)

    def isatty(self) -> bool:
        try:
            return self._stream is not None and not self.broken and self._stream.isatty()
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        if self._stream is None:
            raise io.UnsupportedOperation("the stream was closed before the command started")
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", None) or "utf-8"


def ensure_standard_descriptors() -> None:
    """Point a standard descriptor (0, 1, 2) closed when the CLI started (`>&-`) at /dev/null: otherwise the next
    file the CLI opens takes its number, and what is printed (or a child prints) lands in that file."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            with contextlib.suppress(OSError):
                spare = os.open(os.devnull, os.O_RDWR)
                if spare != fd:
                    os.dup2(spare, fd)
                    os.close(spare)


@contextlib.contextmanager
def pipe_safe_output() -> Iterator[None]:
    """stdout and stderr that survive a reader that closed the pipe early, a stream closed from the start,
    and an encoding that cannot write every character (see _PipeGuard)."""
    saved = sys.stdout, sys.stderr
    out, err = _PipeGuard(saved[0]), _PipeGuard(saved[1])
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    try:
        yield
    finally:
        for guard in (out, err):
            guard.flush()
        sys.stdout, sys.stderr = saved
    if out.failure is not None:
        raise OutputLost(out.failure)


class OutputLost(Exception):
    """stdout failed for a reason other than a reader that has gone: what it printed did not all arrive."""

    def __init__(self, cause: OSError):
        super().__init__(f"error: the output could not be written ({cause.strerror or cause}); what was printed is "
                         "incomplete\n  hint: free space where stdout goes, or write to another file")
