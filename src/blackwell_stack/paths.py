"""Where the project's data files live, and the user cache directory.

The data (data/registry.py lists every file) sits in the repository beside the Nix code that reads it. Python finds
its root the same way in every install: `BLACKWELL_STACK_ROOT` if set (the Nix package sets it to its source), else
the checkout this module was imported from (an editable install).
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

from blackwell_stack.errors import StackError

# A file every copy of the data has (the checkout, and the Nix package's filtered source).
_MARKER = "stacks/stable/stack.json"


def repo_root() -> Path:
    env = os.environ.get("BLACKWELL_STACK_ROOT")
    if env:
        root = Path(env)
        if not (root / _MARKER).is_file():
            raise StackError(
                f"BLACKWELL_STACK_ROOT={env} does not hold the blackwell-stack data ({_MARKER} is missing)",
                "point BLACKWELL_STACK_ROOT at a blackwell-stack checkout, or unset it",
            )
        return root
    for parent in Path(__file__).resolve().parents:
        if (parent / _MARKER).is_file():
            return parent
    raise StackError(
        "cannot find the blackwell-stack data files (pins, recipe, profile)",
        "install from a checkout with `pip install -e .`, or set BLACKWELL_STACK_ROOT to a checkout",
    )


def data_path(*parts: str) -> Path:
    return repo_root().joinpath(*parts)


CACHE_HINT = "set BLACKWELL_STACK_CACHE to a directory you can write to"


def cache_dir(*parts: str) -> Path:
    """The user cache directory for big downloads ($XDG_CACHE_HOME/blackwell-stack), made if missing; one that
    cannot be used (a file in the way, a read-only directory) is a StackError naming the variable that moves it."""
    base = os.environ.get("BLACKWELL_STACK_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "blackwell-stack"
    )
    path = Path(base).joinpath(*parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StackError(f"cannot use the cache directory {path}: {exc.strerror or exc}", CACHE_HINT) from None
    _check_writable_once(path)
    return path


@functools.cache  # a directory that passed is not probed again; one that failed is, on the next call
def _check_writable_once(path: Path) -> None:
    """Probe a cache directory once per process by creating a file in it (the test that holds for root too)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=path)
    except OSError as exc:
        raise StackError(f"the cache directory {path} is not writable: {exc.strerror or exc}", CACHE_HINT) from None
    os.close(fd)
    os.unlink(probe)
