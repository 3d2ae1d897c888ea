"""The one way the tests run the CLI as a user does: `python -m blackwell_stack ARGS` in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support import REPO

SRC = str(REPO / "src")


def run(*args: str, env: dict[str, str] | None = None, root: Path | None = None, timeout: float = 600,
        **kwargs) -> subprocess.CompletedProcess:
    """Its output captured as text unless `stdout`/`stderr` say otherwise; `env` replaces the environment,
    `root` is the data root it reads (BLACKWELL_STACK_ROOT); this checkout's package first on PYTHONPATH."""
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = SRC + (os.pathsep + base["PYTHONPATH"] if base.get("PYTHONPATH") else "")
    if root is not None:
        base["BLACKWELL_STACK_ROOT"] = str(root)
    if "stdout" not in kwargs and "stderr" not in kwargs:
        kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    return subprocess.run([sys.executable, "-m", "blackwell_stack", *args], env=base, timeout=timeout, check=False,
                          **kwargs)
