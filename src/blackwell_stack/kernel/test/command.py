"""`blackwell-stack kernel test`: its arguments and report; what runs is selection.py's, how runner.py's."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from blackwell_stack import output, proc
from blackwell_stack.argtypes import positive_float
from blackwell_stack.errors import ExitCode, StackError
from blackwell_stack.kernel.build import prepare
from blackwell_stack.kernel.test import runner, selection

DEFAULT_TIMEOUT = 1800.0  # seconds for one file
FAILURE_TAIL_LINES = 30  # of a failed file's log, shown when --logs keeps no log to read


def register(ksub: argparse._SubParsersAction) -> None:
    p = ksub.add_parser(
        "test",
        help="run upstream's kernel tests on this host's GPU against an installed or given wheel (one process per file)",
        epilog="Run it on the host that will serve, after building and before serving. Each test file of "
        "sgl-kernel/tests runs in its own pytest process; files that do not apply to the wheel's architectures, this "
        "host's GPUs or the installed packages are skipped with the reason (pkgs/sgl-kernel/kernel-tests.json). On "
        "SM100/SM120 it also runs pkgs/sgl-kernel/gpu_check.py. exit codes: 0 every file that ran passed; 1 a file "
        "failed, crashed, timed out or could not be collected, or none of the wheel's kernels run on this GPU; 2 bad "
        "arguments or no sgl_kernel; 6 no torch or no GPU",
    )
    p.add_argument("--src", default=None, help="the sglang checkout the wheel was built from (tag v0.5.9); its sgl-kernel/tests run")
    p.add_argument("--sources", default=None, metavar="DIR", help="a `kernel sources` directory holding DIR/sglang (instead of --src)")
    p.add_argument("--tests", default=None, metavar="DIR", help="the tests directory itself (default: SRC/sgl-kernel/tests)")
    p.add_argument("--wheel", default=None, help="test this wheel (unpacked into a temporary directory) instead of the installed sgl_kernel")
    p.add_argument("--python", default=sys.executable, help="the venv's Python with torch (and sgl-kernel, without --wheel)")
    p.add_argument("--file", action="append", default=[], metavar="NAME",
                   help="only this test file (as named under the tests directory, e.g. test_fp8_gemm.py) or gpu_check.py; repeatable, run in the order given")
    p.add_argument("--smoke", action="store_true",
                   help="only the bounded subset named in pkgs/sgl-kernel/kernel-tests.json (`smoke`: the kernels the "
                   "served model runs most, and gpu_check.py), each within its time limit there: a quick verdict")
    p.add_argument("--timeout", type=positive_float, default=None, metavar="SECONDS",
                   help="time limit of one file; past it its processes are killed and it counts as failed "
                   "(default 1800, or the smoke subset's own limit with --smoke)")
    p.add_argument("--gpu", default=None, metavar="CAPABILITY",
                   help="choose tests for a GPU of this compute capability (e.g. 12.0) instead of the ones torch sees; "
                   "with --dry-run, to preview on a host without one")
    p.add_argument("--logs", default=None, metavar="DIR",
                   help="keep each file's output, its per-test outcomes and summary.json here (default: a temporary directory)")
    p.add_argument("--dry-run", action="store_true", help="show what would run and what is skipped, and why; run nothing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_test)


def _tests_dir(args: argparse.Namespace) -> Path:
    if args.tests:
        tests = Path(args.tests)
        if not tests.is_dir():
            raise StackError(f"--tests {tests} is not a directory", "pass sgl-kernel/tests of the pinned sglang tree")
        return tests.resolve()
    src = args.src or (Path(args.sources) / "sglang" if args.sources else None)
    if src is None:
        raise StackError("no tests to run: pass --src SGLANG (or --sources DIR, or --tests DIR)",
                         "the tests are sgl-kernel/tests of the sglang tree the wheel was built from")
    checked = prepare.check_source(src)
    for text in checked.warnings:
        print(f"warning: {text}", file=sys.stderr)
    tests = checked.kernel_dir / "tests"
    if not tests.is_dir():
        raise StackError(f"{tests} is missing", "pass the sglang tree at tag v0.5.9, which has sgl-kernel/tests")
    return tests.resolve()


def _test_report(target: selection.Target, tests_dir: Path, wheel: str | None, results: list[runner.FileResult]) -> dict:
    return {"target": target.to_json(), "tests_dir": str(tests_dir), "wheel": wheel,
            "ok": all(r.ok for r in results), "totals": runner.totals(results), "files": [asdict(r) for r in results]}


def cmd_test(args: argparse.Namespace) -> int:
    tests_dir = _tests_dir(args)
    rules = selection.load_rules()
    if args.gpu is not None and not selection.runs_on(args.gpu + "a", args.gpu):
        raise StackError(f"--gpu {args.gpu} is not a compute capability", "write it as major.minor, e.g. 12.0 or 9.0")
    if args.smoke and args.file:
        raise StackError("--smoke and --file both choose the files to run", "pass one of them")
    only = rules["smoke"]["files"] if args.smoke else args.file or None
    timeout = args.timeout or (float(rules["smoke"]["timeout"]) if args.smoke else DEFAULT_TIMEOUT)
    with tempfile.TemporaryDirectory(prefix="sgl-kernel-test-") as tmp:
        env = dict(os.environ)
        if args.wheel:
            site = selection.unpack_wheel(args.wheel, Path(tmp) / "site")
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
        imports, checks = selection.chosen(tests_dir, rules, only)
        target = selection.probe(args.python, set().union(*imports.values()), env, args.gpu)
        if not target.runnable_archs:
            raise StackError(
                f"this sgl_kernel was built for {', '.join(target.wheel_archs or ())}, and none of those runs on this "
                f"GPU ({target.capability}): its import would refuse it",
                f"build for this GPU: blackwell-stack kernel build --arch {target.capability}a", code=ExitCode.CHECK_FAILED)
        items = selection.select(tests_dir, rules, target, imports, checks)
        if args.dry_run:
            _print_test_selection(target, items, args.json)
            return 0
        logs = Path(args.logs).resolve() if args.logs else Path(tmp) / "logs"
        results = runner.run(
            items, args.python, env, tests_dir, logs, timeout=timeout,
            say=lambda text: print(text, file=sys.stderr),
            summary=lambda done: _test_report(target, tests_dir, args.wheel, done),
        )
        report = _test_report(target, tests_dir, args.wheel, results)
        if args.json:
            output.dump_json(report)
        else:
            _print_test_report(target, results, kept_logs=args.logs is not None)
    return 0 if report["ok"] else int(ExitCode.CHECK_FAILED)


def _heading(title: str, target: selection.Target) -> None:
    output.heading(title)
    gpus = ", ".join(f"{n} ({c})" for n, c in zip(target.gpu_names, target.gpus))
    built = ", ".join(target.wheel_archs) if target.wheel_archs is not None else "upstream's list"
    print(f"GPU: {gpus}; torch {target.torch or '(not asked)'} ({target.python})")
    print(f"sgl_kernel: {target.package_dir} (built for {built}; runs {', '.join(target.runnable_archs)} here)")


def _print_test_selection(target: selection.Target, items: list[selection.Item], as_json: bool) -> None:
    if as_json:
        output.dump_json({"target": target.to_json(), "files": [{"name": i.name, "run": i.skip is None, "skip": i.skip}
                                                                for i in items]})
    else:
        _heading("sgl-kernel tests that would run", target)
        output.table(["file", "runs", "why not"], [[i.name, i.skip is None, i.skip or ""] for i in items])


def _print_test_report(target: selection.Target, results: list[runner.FileResult], *, kept_logs: bool) -> None:
    _heading("sgl-kernel tests", target)
    output.table(["file", "result", "passed", "failed", "skipped", "errors", "s", "note"],
                 [[r.name, r.status, r.passed, r.failed, r.skipped, r.errors, r.seconds if r.status != "skipped" else "",
                   r.note] for r in results])
    for r in results:
        if r.ok:
            continue
        print(f"\n{r.name}: {r.status}{' ' + r.note if r.note else ''}")
        for nodeid in r.failures[:10]:
            print(f"  {nodeid}")
        if len(r.failures) > 10:
            print(f"  ... and {len(r.failures) - 10} more")
        if kept_logs:
            print(f"  log: {r.log}")
        elif r.log and Path(r.log).is_file():
            for line in proc.log_tail(r.log, FAILURE_TAIL_LINES):
                print(f"  | {line}")
    t = runner.totals(results)
    verdict = "all passed" if t["files_failed"] == 0 else f"{t['files_failed']} file(s) FAILED"
    print(f"\n{t['files_run']} file(s) run, {t['files_skipped']} skipped; tests: {t['passed']} passed, {t['failed']} "
          f"failed, {t['skipped']} skipped, {t['errors']} errors: {verdict}")
