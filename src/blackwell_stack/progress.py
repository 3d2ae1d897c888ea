"""A dependency-free progress bar on stderr. Where stderr is not a terminal it draws nothing; a long step (a
download of a gigabyte) may say what it is in one line there instead (`line`), so that a log shows why it waits."""

from __future__ import annotations

import sys
import time


def human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GiB"


class Progress:
    """Progress of a byte count (a download) or a step count (a build)."""

    def __init__(self, label: str, total: int | None = None, *, unit: str = "bytes", stream=None,
                 line: str | None = None):
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        if line and not self.enabled:
            print(line, file=self.stream, flush=True)
        self._started = time.monotonic()
        self._last_draw = 0.0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and now - self._last_draw > 0.1:
            self._last_draw = now
            self._draw()

    def _fmt(self, n: float) -> str:
        return human_size(n) if self.unit == "bytes" else str(int(n))

    def _draw(self) -> None:
        elapsed = max(time.monotonic() - self._started, 1e-6)
        rate = self.done / elapsed
        if self.total:
            frac = min(self.done / self.total, 1.0)
            bar = "#" * int(frac * 30)
            text = f"\r{self.label} [{bar:<30}] {frac * 100:5.1f}% {self._fmt(self.done)}/{self._fmt(self.total)}"
        else:
            text = f"\r{self.label} {self._fmt(self.done)}"
        if self.unit == "bytes":
            text += f" {human_size(rate)}/s"
        self.stream.write(text)
        self.stream.flush()
