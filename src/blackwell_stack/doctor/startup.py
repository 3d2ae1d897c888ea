"""Can the environment import what SGLang imports while it starts, for the profile's model?

Metadata says a package is installed; only an import says it loads. The kernel the project built passed every symbol
check and upstream's kernel tests, and SGLang still died at start-up: `import deep_gemm` crashed with a segmentation
fault, and a missing `decord` left Qwen3.5 unservable. So each module of doctor/startup-imports.json (the lines of
the sglang wheel that import it) is imported in a child process of the environment's own interpreter, with the
profile's environment variables, and the outcome is named: imported, missing (which module), an exception (its last
line), a crash (its signal, and the frames faulthandler printed), or a timeout.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from blackwell_stack import parallel, proc
from blackwell_stack.data import registry
from blackwell_stack.doctor.checks import FAIL, OK, WARN, Check
from blackwell_stack.errors import BuildError, ToolchainError

IMPORTED, MISSING, ERROR, CRASHED, TIMED_OUT = "imported", "missing", "error", "crashed", "timed out"
DEFAULT_TIMEOUT_S = 300.0
_FIXES = {
    CRASHED: "a crash at import is a broken build, not a missing package: check the library with "
             "`blackwell-stack inspect` (C++ runtime) and rebuild it",
    MISSING: "install the stack's lock into this environment (`uv sync --frozen` of stacks/NAME, or "
             "`blackwell-stack stack doctor NAME` for what differs)",
}

# Runs in the environment's interpreter: one import, its outcome as the last line of stdout.
_CHILD = """
import faulthandler, importlib, json, sys
faulthandler.enable()
name = sys.argv[1]
try:
    importlib.import_module(name)
except ModuleNotFoundError as exc:
    print(json.dumps({"outcome": "missing", "module": exc.name, "detail": str(exc)}))
except BaseException as exc:
    print(json.dumps({"outcome": "error", "detail": f"{type(exc).__name__}: {exc}"[:2000]}))
else:
    print(json.dumps({"outcome": "imported"}))
"""


@dataclass(frozen=True)
class Startup:
    """One module SGLang's start-up imports, and why."""

    module: str
    why: str
    source: str  # file:line of the sglang wheel


def _applies(entry: dict[str, Any], architecture: str | None, gpu_cc: str | None, env: dict[str, str]) -> bool:
    if "architectures" in entry and architecture not in entry["architectures"]:
        return False
    when = entry.get("when") or {}
    least = when.get("min_compute_capability")
    if least and gpu_cc and _cc(gpu_cc) < _cc(least):
        return False
    return not any(env.get(name, "").strip().lower() in values for name, values in (when.get("off_when_env") or {}).items())


def _cc(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def imports_for(sglang: str, *, architecture: str | None, gpu_cc: str | None,
                env: dict[str, str]) -> list[Startup] | None:
    """What SGLang `sglang` imports at start-up here (None: no list for that version)."""
    entries = registry.load("startup-imports")["sglang"].get(sglang)
    if entries is None:
        return None
    return [Startup(e["module"], e["why"], f"{e['source']['file']}:{e['source']['line']}")
            for e in entries if _applies(e, architecture, gpu_cc, env)]


@dataclass(frozen=True)
class Outcome:
    module: str
    outcome: str
    detail: str


def import_in_child(python: str, module: str, env: dict[str, str], timeout: float = DEFAULT_TIMEOUT_S) -> Outcome:
    """Import `module` in a fresh process of `python`; what happened."""
    child_env = {**os.environ, **env, "PYTHONFAULTHANDLER": "1"}
    try:
        result = proc.run([python, "-c", _CHILD, module], check=False, timeout=timeout, env=child_env)
    except BuildError:
        return Outcome(module, TIMED_OUT, f"the import did not finish within {timeout:g} s")
    except ToolchainError as exc:
        return Outcome(module, ERROR, exc.message)
    if result.returncode < 0:
        frames = [line.strip() for line in result.stderr.splitlines() if line.strip().startswith("File ")]
        where = f"; last frames: {' <- '.join(frames[:3])}" if frames else ""
        return Outcome(module, CRASHED, f"the process died of {proc.signal_name(-result.returncode)}{where}")
    try:
        said = json.loads((result.stdout.strip().splitlines() or ["{}"])[-1])
    except ValueError:
        said = {}
    if not isinstance(said, dict) or said.get("outcome") not in (IMPORTED, MISSING, ERROR):
        tail = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
        return Outcome(module, ERROR, f"the child exited {result.returncode} without a result ({tail[:300]})")
    if said["outcome"] == MISSING:
        return Outcome(module, MISSING, f"no module named {said.get('module') or module!r} ({said.get('detail', '')})")
    return Outcome(module, str(said["outcome"]), str(said.get("detail", "")))


def checks(python: str, sglang: str, *, architecture: str | None, gpu_cc: str | None,
           env: dict[str, str], timeout: float = DEFAULT_TIMEOUT_S) -> list[Check]:
    """One check per start-up import; imports run side by side, each in its own process."""
    wanted = imports_for(sglang, architecture=architecture, gpu_cc=gpu_cc, env=env)
    if wanted is None:
        return [Check("startup", "sglang start-up imports", WARN, sglang,
                      f"no list of what sglang {sglang} imports at start-up (doctor/startup-imports.json)",
                      "add the version's entries, read from its wheel")]
    outcomes = parallel.run_all(lambda s: import_in_child(python, s.module, env, timeout), wanted,
                                jobs=min(4, len(wanted)))
    return [_check(s, o, gpu_cc) for s, o in zip(wanted, outcomes)]


def _check(startup: Startup, outcome: Outcome, gpu_cc: str | None) -> Check:
    name = f"import {startup.module}"
    if outcome.outcome == IMPORTED:
        return Check("startup", name, OK, IMPORTED, f"as SGLang does ({startup.source})")
    detail = f"{outcome.detail}; SGLang imports it at start-up ({startup.source}): {startup.why}"
    if outcome.outcome in _FIXES:
        return Check("startup", name, FAIL, outcome.outcome, detail, _FIXES[outcome.outcome])
    # An exception without a GPU may be the GPU's absence: SGLang's kernels ask for one while they load.
    status = WARN if gpu_cc is None else FAIL
    more = "; no GPU on this host, which such an import may need" if gpu_cc is None else ""
    return Check("startup", name, status, outcome.outcome, detail + more,
                 "read the error above; on the GPU host it must import")
