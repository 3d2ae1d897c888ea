"""The one way the tests run the CLI as a user does: `python -m blackwell_stack ARGS` in a process of its own.

`start` is for the tests that signal it. A child inherits the signals its parent ignores (a shell's background job
ignores SIGINT, `nohup` SIGHUP), so it sets them as a terminal gives them, whatever started the suite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from support import REPO

SRC = str(REPO / "src")


def run(*args: str, env: dict[str, str] | None = None, root: Path | None = None, timeout: float = 600,
        **kwargs) -> subprocess.CompletedProcess:
    """Its output captured as text unless `stdout`/`stderr` say otherwise; `env` replaces the environment,
    `root` is the data root it reads (BLACKWELL_STACK_ROOT); this checkout's package first on PYTHONPATH."""
    base = _environment(env)
    if root is not None:
        base["BLACKWELL_STACK_ROOT"] = str(root)
    if "stdout" not in kwargs and "stderr" not in kwargs:
        kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    return subprocess.run([sys.executable, "-m", "blackwell_stack", *args], env=base, timeout=timeout, check=False,
                          **kwargs)


# Ctrl-C as KeyboardInterrupt, SIGHUP and SIGTERM by default, then the ones named in argv[1] ignored; then the CLI.
_LAUNCH = """import runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
for s in (signal.SIGHUP, signal.SIGTERM):
    signal.signal(s, signal.SIG_DFL)
for name in filter(None, sys.argv.pop(1).split(",")):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
runpy.run_module("blackwell_stack", run_name="__main__", alter_sys=True)
"""


def start(*args: str, ignored: tuple[signal.Signals, ...] = (), env: dict[str, str] | None = None,
          **kwargs) -> subprocess.Popen:
    """The CLI started in the background, its signals as a terminal gives them but for `ignored` (as nohup
    leaves SIGHUP); output piped as text unless `stdout`/`stderr` say otherwise."""
    base = _environment(env)
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    kwargs.setdefault("text", True)
    return subprocess.Popen([sys.executable, "-c", _LAUNCH, ",".join(s.name for s in ignored), *args], env=base,
                            **kwargs)


def _environment(env: dict[str, str] | None) -> dict[str, str]:
    """env (default: this one) with this checkout's package first on PYTHONPATH."""
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = SRC + (os.pathsep + base["PYTHONPATH"] if base.get("PYTHONPATH") else "")
    return base
