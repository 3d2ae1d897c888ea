"""The acceptance run: every check only the GPU host can make, in order, each bounded, into one report.

The steps are the project's own commands, each run as `python -m blackwell_stack COMMAND --json` in a process group
of its own, so that its time bound ends it with everything it started (kernel test's pytest processes,
bench_serving): doctor, stack doctor, the kernel's import and a subset of `kernel test`, SGLang started through
`serve run` until /health answers (or, with --url, a server already running), smoke, the accuracy gate and bench.
A step that fails says why and the run goes on; a step that needs what failed before it (a server that never got
ready) is skipped, saying so. The server it started is stopped whatever happens: at the end, on an error, on Ctrl-C
or SIGTERM (cli/__init__.py raises both where the run is). acceptance_report.py writes what was found.
"""

from __future__ import annotations

import collections
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.errors import StackError, ToolchainError
from blackwell_stack.serve.readiness import answers_200
from blackwell_stack.verify import client

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
# A process group asked to stop (SIGTERM) gets this long before SIGKILL: SGLang frees its GPUs on SIGTERM.
STOP_GRACE_S = 30.0
# Lines of a step's stderr kept as evidence when it printed no JSON.
TAIL_LINES = 20


@dataclass
class Step:
    name: str
    verdict: str
    evidence: str  # one line: what was found, or why it failed or was skipped
    bound_s: float | None = None
    seconds: float = 0.0
    file: str | None = None  # the step's whole output (its --json) in the report directory
    data: dict | None = field(default=None, repr=False)  # that output, parsed; not in the report's step list
    extra: dict = field(default_factory=dict)  # more of it for the report (bench: its baseline comparison)

    def to_json(self) -> dict:
        found = {k: v for k, v in asdict(self).items() if k not in ("data", "extra")}
        return {**found, **self.extra}


def say(text: str) -> None:
    print(f"acceptance: {text}", file=sys.stderr, flush=True)


def cli(*args: str) -> list[str]:
    """This CLI, as a program of its own (the steps are its commands)."""
    return [sys.executable, "-m", "blackwell_stack", *args]


def run_bounded(argv: list[str], bound_s: float, label: str) -> tuple[int | None, str, list[str]]:
    """Run argv in a process group of its own for at most bound_s seconds (proc.run_group): (exit code, or None
    past the bound, 127 when it cannot start; its stdout; the last TAIL_LINES of its stderr, which is relayed as it
    comes, indented under the step's progress line)."""
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    prefix = f"{label}: "

    def relay(line: str) -> None:
        print(f"  {'' if line.startswith(prefix) else prefix}{line.rstrip()}", file=sys.stderr, flush=True)
        tail.append(line.rstrip())

    try:
        code, out = proc.run_group(argv, bound_s, relay, grace=5.0, stdout=True)
    except ToolchainError as exc:
        return 127, "", [exc.message]
    return code, out, list(tail)


def command_step(name: str, argv: list[str], bound_s: float, workdir: Path, file: str,
                 summary: Callable[[dict], str]) -> Step:
    """One of this CLI's commands as a step: passed on exit 0; its JSON kept in `file`; the evidence is
    summary(that JSON), else the error it printed."""
    say(f"{name}: at most {bound_s:g} s ...")
    started = time.monotonic()
    code, stdout, tail = run_bounded(argv, bound_s, name)
    seconds = round(time.monotonic() - started, 1)
    data = None
    with contextlib.suppress(ValueError):
        data = json.loads(stdout)
    if isinstance(data, dict):
        (workdir / file).write_text(json.dumps(data, indent=2) + "\n")
        try:
            evidence = summary(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a field this summary did not expect
            evidence = f"(no summary: {exc!r})"
    else:
        data = None
        errors = [line for line in tail if line.startswith("error:")]
        evidence = (errors or tail or ["(no output)"])[-1]
    verdict = PASSED if code == 0 else FAILED
    if code is None:
        evidence = f"ran past its bound of {bound_s:g} s; {evidence}"
    elif code not in (0, 1):
        evidence = f"exit code {code}: {evidence}"
    say(f"{name}: {verdict} ({seconds:g} s): {evidence}")
    return Step(name, verdict, evidence, bound_s, seconds, None if data is None else file, data)


# ---------------------------------------------------------------- the server


def launch(argv: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return proc.start(argv, new_session=True, stdout=out)


def stop(child: subprocess.Popen) -> None:
    if child.poll() is None:
        say(f"stopping the server it started (process group {child.pid}) ...")
        proc.stop_group(child, STOP_GRACE_S)


def wait_ready(child: subprocess.Popen, url: str, log: Path, bound_s: float) -> Step:
    """Until GET /health answers 200, the server exits, or bound_s passes."""
    say(f"server: started through serve run, ready within {bound_s:g} s (log: {log.name}) ...")
    started = time.monotonic()
    deadline = started + bound_s
    while True:
        if answers_200(f"{url}/health", timeout=5.0):
            verdict, evidence = PASSED, f"{url}/health answered 200 after {time.monotonic() - started:.0f} s"
            break
        if child.poll() is not None:
            verdict, evidence = FAILED, (f"serve run exited ({child.returncode}) before {url}/health answered 200: "
                                         f"{_last_line(log)}")
            break
        if time.monotonic() >= deadline:
            verdict, evidence = FAILED, f"{url}/health did not answer 200 within {bound_s:g} s: {_last_line(log)}"
            break
        time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
    seconds = round(time.monotonic() - started, 1)
    say(f"server: {verdict} ({seconds:g} s): {evidence}")
    return Step("server", verdict, evidence, bound_s, seconds, log.name)


def _last_line(log: Path) -> str:
    """The server log's last error line, else its last line."""
    lines = [line for line in proc.log_tail(log, 4096, limit=4096) if line.strip()]
    errors = [line for line in lines if line.lower().startswith("error")]
    return (errors or lines or ["(it printed nothing)"])[-1][:300]


def reach_server(url: str, api_key: str | None, bound_s: float) -> tuple[str | None, Step]:
    """A server already running at url: its first model, or why it could not be listed."""
    say(f"server: {url} (not started here), its models within {bound_s:g} s ...")
    started = time.monotonic()
    try:
        model = client.first_model_id(client.Endpoint.parse(url, api_key), timeout=bound_s)
        verdict, evidence = PASSED, f"{url} lists model {model!r} (a server already running: not started here)"
    except StackError as exc:
        model, verdict, evidence = None, FAILED, f"{url} does not answer /v1/models: {exc.message}"
    seconds = round(time.monotonic() - started, 1)
    say(f"server: {verdict}: {evidence}")
    return model, Step("server", verdict, evidence, bound_s, seconds)
