"""C++ symbol names for people, through binutils' c++filt.

Without c++filt the mangled names are returned unchanged: every report stays
correct, only less readable.
"""

from __future__ import annotations

import contextlib
import shutil

from blackwell_stack import proc
from blackwell_stack.errors import StackError


def demangle(names: list[str]) -> dict[str, str]:
    """Map each mangled name to its demangled form (itself when c++filt is missing or fails)."""
    names = list(dict.fromkeys(names))
    tool = shutil.which("c++filt")
    if names and tool:
        with contextlib.suppress(StackError):
            result = proc.run([tool], input="\n".join(names) + "\n", check=False, timeout=60)
            lines = result.stdout.splitlines()
            if result.returncode == 0 and len(lines) == len(names):
                return dict(zip(names, lines))
    return {n: n for n in names}


def parameters(demangled: str) -> list[str]:
    """A demangled function's parameter types: `f<a, b>(int, std::pair<c, d>)` -> [`int`, `std::pair<c, d>`]."""
    depth, params = 0, None
    for ch in demangled:
        if ch == "(" and depth == 0 and params is None:
            params = [""]
            continue
        if ch in "(<":
            depth += 1
        elif ch in ")>":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0 and params is not None:
            params.append("")
            continue
        if params is not None:
            params[-1] += ch
    return [p.strip() for p in params or [] if p.strip()]
