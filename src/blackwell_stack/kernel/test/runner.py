"""Run kernel tests one file per process and count what happened: `kernel test`'s runner.

Each upstream test file runs in its own pytest process (a kernel that kills its process takes only that file with
it), in a process group of its own (killed whole past its time limit or on an interrupt), with its output in a log.
The plugin pytest_outcomes.py writes each test's progress as it happens, so a crash names the test that was running.
Project checks (pkgs/sgl-kernel/gpu_check.py) run as scripts: their exit code is their verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.fileio import atomic_write_json
from blackwell_stack.kernel.test import pytest_outcomes
from blackwell_stack.kernel.test.selection import Item

PLUGIN = "blackwell_stack_test_outcomes"
# A file's verdicts; every one but these two is a failure of the run.
PASSED, SKIPPED = "passed", "skipped"
FAILED, CRASHED, TIMED_OUT, ERROR, NO_TESTS = "failed", "crashed", "timed out", "error", "no tests"
INTERRUPTED = "interrupted"
_PYTEST_STATUS = {0: PASSED, 1: FAILED, 5: NO_TESTS}


@dataclass
class FileResult:
    name: str
    status: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    seconds: float = 0.0
    exit_code: int | None = None
    note: str = ""
    failures: list[str] = field(default_factory=list)  # node ids of failed and erroring tests
    log: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in (PASSED, SKIPPED, NO_TESTS)


@dataclass(frozen=True)
class Outcomes:  # what the plugin recorded for one file
    tests: dict[str, str]  # node id -> passed / failed / skipped / error (the one running at the end: failed)
    collect_errors: list[str]
    collect_skips: list[str]  # files (modules) that skipped themselves while being collected
    running: str | None  # a test that started and never ended
    status: int | None  # pytest's exit status, None when the session never finished


def read_outcomes(path: Path) -> Outcomes:
    events: dict[str, list[dict]] = {}
    for line in path.read_text(errors="replace").splitlines() if path.is_file() else []:
        with contextlib.suppress(json.JSONDecodeError):  # a line cut short by a crash
            event = json.loads(line)
            events.setdefault(event.get("event"), []).append(event)
    reports: dict[str, set[tuple[str, str]]] = {}
    for event in events.get("report", []):
        reports.setdefault(event["id"], set()).add((event["when"], event["outcome"]))
    tests = {nodeid: _verdict(got) for nodeid, got in reports.items()}
    ended = {e["id"] for e in events.get("end", [])}
    running = next((e["id"] for e in reversed(events.get("start", [])) if e["id"] not in ended), None)
    if running is not None:  # it took the process down, or ran past the time limit: a failure
        tests[running] = FAILED
    finish = events.get("finish")
    return Outcomes(tests, [e["id"] for e in events.get("collect_error", [])],
                    [e["id"] for e in events.get("collect_skip", [])], running, finish[-1]["status"] if finish else None)


def _verdict(reports: set[tuple[str, str]]) -> str:
    """A test's verdict from its phases' (when, outcome): a failure outside its call is an error."""
    outcomes = {outcome for _when, outcome in reports}
    if "failed" in outcomes:
        return FAILED if ("call", "failed") in reports else ERROR
    return SKIPPED if "skipped" in outcomes else PASSED


def _run_process(argv: list[str], cwd: Path, env: Mapping[str, str], log: Path, timeout: float) -> tuple[int | None, float]:
    """(exit code, None past the time limit; seconds). What the test left running (spawned workers) ends with it."""
    start = time.monotonic()
    with open(log, "wb") as out:
        code = proc.wait_group(proc.start(argv, cwd=cwd, env=env, new_session=True, stdout=out), timeout)
    return code, time.monotonic() - start


def _killed(code: int | None, timeout: float, running: str = "") -> tuple[str, str] | None:
    """(status, note) of a process that ran past its time limit or died of a signal; None for an exit."""
    if code is None:
        return TIMED_OUT, f"killed after {timeout:g} s{running}"
    return (CRASHED, f"killed by {proc.signal_name(-code)}{running}") if code < 0 else None


def run_item(item: Item, python: str, env: Mapping[str, str], cwd: Path, logs: Path, plugin_dir: Path,
             timeout: float) -> FileResult:
    stem = item.name.replace("/", "__")
    log = logs / f"{stem}.log"
    if item.kind == "script":
        code, seconds = _run_process([python, str(item.path)], cwd, env, log, timeout)
        status, note = _killed(code, timeout) or (PASSED if code == 0 else FAILED, "")
        passed = status == PASSED
        return FileResult(item.name, status, int(passed), int(not passed), seconds=round(seconds, 1), exit_code=code,
                          note=note, log=str(log))
    outcomes_path = logs / f"{stem}.outcomes.jsonl"
    outcomes_path.unlink(missing_ok=True)
    child_env = {**env, pytest_outcomes.ENV: str(outcomes_path),
                 "PYTHONPATH": os.pathsep.join(filter(None, [str(plugin_dir), env.get("PYTHONPATH", "")]))}
    argv = [python, "-m", "pytest", "-p", "no:cacheprovider", "-p", PLUGIN, "-q", "-rfE", "--color=no", str(item.path)]
    code, seconds = _run_process(argv, cwd, child_env, log, timeout)
    got = read_outcomes(outcomes_path)
    counts = {s: sum(1 for v in got.tests.values() if v == s) for s in (PASSED, FAILED, SKIPPED, ERROR)}
    failures = [n for n, v in got.tests.items() if v in (FAILED, ERROR)] + got.collect_errors
    result = FileResult(item.name, ERROR, counts[PASSED], counts[FAILED], counts[SKIPPED] + len(got.collect_skips),
                        counts[ERROR] + len(got.collect_errors), round(seconds, 1), code, failures=failures, log=str(log))
    running = f" in {got.running}" if got.running else ""
    if killed := _killed(code, timeout, running):
        result.status, result.note = killed
    elif got.status is None:
        result.status, result.note = CRASHED, f"exited with code {code} before pytest finished{running}"
    elif got.status == 5 and got.collect_skips and not got.collect_errors:
        result.status, result.note = SKIPPED, "the file skipped itself (pytest.skip at module level; its log says why)"
    else:
        result.status = _PYTEST_STATUS.get(got.status, ERROR)
        if result.status == ERROR:
            result.note = f"pytest exit status {got.status}"
    return result


def run(items: Iterable[Item], python: str, env: Mapping[str, str], cwd: Path, logs: Path, *, timeout: float,
        say: Callable[[str], None], summary: Callable[[list[FileResult]], dict]) -> list[FileResult]:
    """The results in order, skipped items with their reason. logs/summary.json is written after each file, so an
    interrupted run still leaves what it found."""
    plugin_dir = logs / "plugin"  # only the outcome plugin, put on the test processes' path
    plugin_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(pytest_outcomes.__file__), plugin_dir / f"{PLUGIN}.py")
    results: list[FileResult] = []
    try:
        for item in items:
            if item.skip is not None:
                results.append(FileResult(item.name, SKIPPED, note=item.skip))
                continue
            say(f"running {item.name}")
            try:
                result = run_item(item, python, env, cwd, logs, plugin_dir, timeout)
            except KeyboardInterrupt:  # the file's processes are gone; keep what was found, then stop
                results.append(FileResult(item.name, INTERRUPTED, note="the run was interrupted while this file ran"))
                raise
            results.append(result)
            say(f"{item.name}: {result.status} ({result.passed} passed, {result.failed} failed, {result.skipped} "
                f"skipped, {result.errors} errors, {result.seconds:g} s){' ' + result.note if result.note else ''}")
            atomic_write_json(logs / "summary.json", summary(results))
    finally:
        atomic_write_json(logs / "summary.json", summary(results))
    return results


def totals(results: list[FileResult]) -> dict[str, int]:
    out = {key: sum(getattr(r, key) for r in results) for key in ("passed", "failed", "skipped", "errors")}
    out["files_run"] = sum(1 for r in results if r.status != SKIPPED)
    out["files_skipped"] = sum(1 for r in results if r.status == SKIPPED)  # by the rules, or by themselves
    out["files_failed"] = sum(1 for r in results if not r.ok)
    return out
