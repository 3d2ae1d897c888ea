"""`acceptance`: the one command the GPU host runs (acceptance.py), its options, its steps and its report."""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from blackwell_stack import output
from blackwell_stack.argtypes import positive_float, positive_int
from blackwell_stack.data import stack as stack_data
from blackwell_stack.errors import ExitCode, StackError
from blackwell_stack.hashes import sha256_file
from blackwell_stack.inputfiles import regular_file
from blackwell_stack.serve.service import configure
from blackwell_stack.verify import acceptance as run
from blackwell_stack.verify import acceptance_report as report_mod
from blackwell_stack.verify import api_key, baseline, bench
from blackwell_stack.verify.acceptance import FAILED, PASSED, SKIPPED, Step

# Each step's time bound in seconds (--bound STEP=SECONDS). The server's covers loading 397B parameters on 8 GPUs.
BOUNDS = {"doctor": 900.0, "stack doctor": 600.0, "kernel import": 300.0, "kernel test": 1800.0,
          "server": 2400.0, "smoke": 600.0, "accuracy": 2400.0, "bench": 3600.0}
# What both kernel distributions (sgl-kernel, sglang-kernel) install, and SGLang imports.
KERNEL_MODULE = "sgl_kernel"
# Imports the kernel on the GPU the way SGLang does, and says what it found (one JSON line).
KERNEL_IMPORT = """
import json, sys
try:
    import torch
    module = __import__(sys.argv[1])
except Exception as exc:
    sys.exit(f"error: cannot import {sys.argv[1]}: {type(exc).__name__}: {exc}")
found = {"module": sys.argv[1], "file": getattr(module, "__file__", None), "torch": torch.__version__,
         "cuda_available": torch.cuda.is_available(),
         "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
print(json.dumps(found))
if not found["cuda_available"]:
    sys.exit("error: torch sees no GPU: the kernel was imported, not loaded on a GPU")
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "acceptance",
        help="on the GPU host: doctor, the kernel, SGLang through serve run, smoke, the accuracy gate and bench, "
        "into one report",
        description="Run every check only the GPU host can make, in order, each within a time bound (--bound) and "
        "with a progress line on stderr: doctor and stack doctor; the kernel's import on the GPU and a subset of "
        "`kernel test` (with --kernel-tests); SGLang started through `serve run` until /health answers (or the "
        "server at --url, then nothing is started or stopped); smoke; the accuracy gate; bench at the seed's "
        "levels, compared with the seed's figures. A failing step says why and the run goes on; the steps that "
        "need a server that never got ready are skipped. The server it started is stopped whatever happens. "
        "Writes a directory (--report-dir) with report.json, report.md and each step's JSON; `plan --report "
        "DIR/report.json` then marks what passed as verified. Exit 0 when every step passed, 1 when one failed "
        "or was skipped.",
    )
    p.add_argument("--stack", default=None, metavar="NAME", help="the stack the host runs (default: the default stack)")
    p.add_argument("--profile", default=None, help="the serving profile (default: the stack's first)")
    p.add_argument("--python", default=sys.executable,
                   help="the serving venv's bin/python: checked, and the one that serves (default: this one)")
    p.add_argument("--url", help="check the server already running there (the NixOS service, e.g. "
                   "http://127.0.0.1:30000) instead of starting one")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="override a flag of the server started, as serve run's --set; repeatable")
    p.add_argument("--model", help="model name to ask for (default: the first one /v1/models lists)")
    p.add_argument("--target-cc", default=None, help="compute capability doctor checks for (default: doctor's, 12.0)")
    p.add_argument("--kernel-tests", metavar="DIR", help="sgl-kernel/tests of the sglang tree the kernel was built "
                   "from (without it, kernel test is skipped)")
    p.add_argument("--kernel-wheel", metavar="FILE", help="the kernel wheel installed, whose sha256 the report "
                   "names (default: the one the install recorded, if any)")
    p.add_argument("--questions", type=positive_int, default=None, help="GSM8K questions of the gate (default: "
                   "the gate's)")
    p.add_argument("--gsm8k-data", metavar="DIR", help="GSM8K's train.jsonl and test.jsonl (default: the user cache)")
    p.add_argument("--bench-levels", default=",".join(map(str, bench.DEFAULT_CONCURRENCY)),
                   help="bench's concurrency levels (default: the seed's, %(default)s)")
    p.add_argument("--baseline", default=str(baseline.DEFAULT_BASELINE),
                   help="the figures bench must reach, or 'none' (default: the seed's)")
    p.add_argument("--bound", action="append", default=[], metavar="STEP=SECONDS",
                   help="a step's time bound; repeatable (defaults: "
                   + ", ".join(f"{k}={v:g}" for k, v in BOUNDS.items()) + ")")
    p.add_argument("--report-dir", type=Path, help="the report directory to make (default: acceptance-DATE here)")
    api_key.add_options(p)
    p.add_argument("--json", action="store_true", help="print report.json instead of the summary")
    p.set_defaults(func=cmd_acceptance)


def _bounds(given: list[str]) -> dict[str, float]:
    bounds = dict(BOUNDS)
    for text in given:
        name, sep, value = text.rpartition("=")
        if not sep or name not in bounds:
            raise StackError(f"bad --bound {text!r}", f"write STEP=SECONDS, STEP one of {', '.join(BOUNDS)}")
        try:
            bounds[name] = positive_float(value)
        except argparse.ArgumentTypeError as exc:
            raise StackError(f"bad --bound {text!r}: {exc}", "give the seconds as a positive number") from None
    return bounds


def _server_url(service) -> str:
    argv = service.rendered.argv
    host = argv[argv.index("--host") + 1] if "--host" in argv else "127.0.0.1"
    port = argv[argv.index("--port") + 1] if "--port" in argv else "30000"
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _kernel_wheel(path: str | None, versions: dict) -> dict:
    if path:
        return {"sha256": sha256_file(regular_file(path, "--kernel-wheel")), "source": f"--kernel-wheel {Path(path).name}"}
    if versions.get("kernel_wheel_sha256"):
        return {"sha256": versions["kernel_wheel_sha256"], "source": "the install's direct_url.json"}
    return {"sha256": None, "source": "not recorded by the install; pass --kernel-wheel FILE"}


# ---------------------------------------------------------------- what each step's JSON says, in one line


def _doctor(data: dict) -> str:
    failing = [c["name"] for c in data["checks"] if c["status"] == "fail"]
    return f"overall {data['status']}" + (f"; failing: {', '.join(failing)}" if failing else "")


def _stack_doctor(data: dict) -> str:
    diffs = data["differences"]
    return f"{data['matched']} distributions as locked, {len(diffs)} difference(s)" + (
        f": {', '.join(str(d.get('name')) for d in diffs[:5])}" if diffs else "")


def _kernel_test(data: dict) -> str:
    t = data["totals"]
    return (f"{t['files_run']} file(s) run, {t['files_skipped']} skipped; tests {t['passed']} passed, {t['failed']} "
            f"failed, {t['errors']} errors")


def _smoke(data: dict) -> str:
    checks = sorted({v["check"] for v in data["verdicts"]})
    return f"{len(data['answers'])} answers, {len(data['verdicts'])} verdict(s)" + (
        f": {', '.join(checks)}" if checks else "")


def _accuracy(data: dict) -> str:
    t = data["threshold"]
    text = (f"accuracy {data['accuracy']:.3f} ({data['correct']} of {data['questions']}), threshold "
            f"{t['min_accuracy']:g} ({t['kind']})")
    return text + ("; " + "; ".join(data["reasons"]) if data["reasons"] else "")


def _bench(data: dict) -> str:
    levels = ", ".join(f"c={lv['concurrency']}: {lv['output_tok_s']:.0f} tok/s" for lv in data["levels"])
    rows = data.get("baseline", {}).get("comparison", [])
    compared = "; ".join(f"{r['name']} {r['status']}" for r in rows)
    return f"{levels}; {data['answers']['broken']} broken" + (f"; seed figures: {compared}" if compared else "")


# ---------------------------------------------------------------- the command


def cmd_acceptance(args: argparse.Namespace) -> int:
    # Everything that can be refused is, before any step runs.
    bounds = _bounds(args.bound)
    levels = bench.parse_levels(args.bench_levels, "--bench-levels")
    stack = stack_data.load(args.stack)
    profile = args.profile or stack.profiles[0]
    service = configure(profile, stack=stack, settings=args.settings)
    profile = service.rendered.profile
    key = api_key.from_args(args)
    if args.baseline.lower() != "none":
        baseline.load(args.baseline)
    if args.kernel_tests and not Path(args.kernel_tests).is_dir():
        raise StackError(f"--kernel-tests {args.kernel_tests} is not a directory",
                         "pass sgl-kernel/tests of the pinned sglang tree")
    if args.kernel_wheel:
        regular_file(args.kernel_wheel, "--kernel-wheel")
    started_at = datetime.datetime.now(datetime.UTC)
    final = args.report_dir or Path(f"acceptance-{started_at:%Y%m%d-%H%M%S}")
    work = report_mod.workdir(final)
    state = _State(args.url or _server_url(service))
    try:
        _steps(args, stack, profile, bounds, levels, key, work, state)
    except BaseException as exc:
        why = "interrupted (Ctrl-C or a signal)" if isinstance(exc, KeyboardInterrupt) else str(exc)
        state.steps.append(Step("stopped", FAILED, f"the run stopped: {why}; the steps after this were not run"))
        raise
    finally:
        if state.server is not None:
            run.stop(state.server)
        try:
            versions = report_mod.installed_versions(args.python, stack.kernel["package"])
            report = report_mod.build(
                stack, profile, steps=state.steps, versions=versions, date=started_at.isoformat(timespec="seconds"),
                mode="url" if args.url else "started", url=state.url, model=state.model,
                kernel_wheel=_kernel_wheel(args.kernel_wheel, versions))
            report_mod.publish(work, final, report)
        except BaseException:  # a second Ctrl-C, or a report that cannot be written: nothing half-written stays
            report_mod.discard(work)
            raise
        run.say(f"report: {final}/report.json and report.md")
    if args.json:
        output.dump_json(report)
    else:
        print(report_mod.markdown(report))
        print(f"report: {final}/report.json; `blackwell-stack plan --report {final}/report.json` marks what passed")
    return int(ExitCode.OK if report["ok"] else ExitCode.CHECK_FAILED)


@dataclass
class _State:
    """What the run has found so far: read by the report whatever stopped it, and the server to stop."""

    url: str
    steps: list[Step] = field(default_factory=list)
    server: subprocess.Popen | None = None  # the server it started
    model: str | None = None


def _steps(args, stack, profile: str, bounds: dict[str, float], levels: tuple[int, ...], key: str | None,
           work: Path, state: _State) -> None:
    """Every step in order, each appended to state.steps as it ends."""
    steps, url = state.steps, state.url
    # The server's key, to the steps that ask it: its file where one was given (out of the process list).
    keys = ["--api-key-file", args.api_key_file] if args.api_key_file else ["--api-key", key] if key else []
    py = ["--python", args.python]
    cc = ["--target-cc", args.target_cc] if args.target_cc else []
    steps.append(run.command_step("doctor", run.cli("doctor", "--json", "--profile", profile, *py, *cc),
                                  bounds["doctor"], work, "doctor.json", _doctor))
    steps.append(run.command_step("stack doctor", run.cli("stack", "doctor", stack.name, *py, "--json"),
                                  bounds["stack doctor"], work, "stack-doctor.json", _stack_doctor))
    steps.append(run.command_step("kernel import", [args.python, "-c", KERNEL_IMPORT, KERNEL_MODULE],
                                  bounds["kernel import"], work, "kernel-import.json",
                                  lambda d: f"{d['module']} from {d['file']} on {d['gpu']} (torch {d['torch']})"))
    if not args.kernel_tests:
        steps.append(Step("kernel test", SKIPPED, "skipped: no --kernel-tests DIR (sgl-kernel/tests of the sglang "
                          "tree)", bounds["kernel test"]))
    else:
        # The bounded subset is kernel test's own (`--smoke`, pkgs/sgl-kernel/kernel-tests.json), as in the flake's check.
        steps.append(run.command_step(
            "kernel test", run.cli("kernel", "test", "--tests", args.kernel_tests, *py, "--smoke", "--json"),
            bounds["kernel test"], work, "kernel-test.json", _kernel_test))
    if args.url:
        model, step = run.reach_server(url, key, min(bounds["server"], 120.0))
    else:
        serve = run.cli("serve", "run", "--stack", stack.name, "--profile", profile, *py,
                        *[a for s in args.settings for a in ("--set", s)])
        state.server = run.launch(serve, work / "server.log")
        step, model = run.wait_ready(state.server, url, work / "server.log", bounds["server"]), None
        if step.verdict == PASSED:
            model, listed = run.reach_server(url, key, 120.0)
            if listed.verdict != PASSED:
                step.verdict, step.evidence = FAILED, listed.evidence
    steps.append(step)
    model = state.model = args.model or model
    if step.verdict != PASSED or model is None:
        why = "skipped: the server is not ready (the server step says why)"
        for name in ("smoke", "accuracy", "bench"):
            steps.append(Step(name, SKIPPED, why, bounds[name]))
        return
    ask = ["--model", model, *keys, "--json"]
    steps.append(run.command_step("smoke", run.cli("smoke", url, *ask, "--timeout", f"{min(300, bounds['smoke']):g}"),
                                  bounds["smoke"], work, "smoke.json", _smoke))
    gate = ["--questions", str(args.questions)] if args.questions else []
    gate += ["--data", args.gsm8k_data] if args.gsm8k_data else []
    run_timeout = max(1.0, bounds["accuracy"] - min(60.0, bounds["accuracy"] / 10))  # the gate ends first, graded
    steps.append(run.command_step(
        "accuracy", run.cli("accuracy", url, "--profile", profile, *gate, "--run-timeout", f"{run_timeout:g}",
                            "--timeout", f"{min(300.0, run_timeout):g}", *ask),
        bounds["accuracy"], work, "accuracy.json", _accuracy))
    plot = ["--plot", str(work / report_mod.PLOT)] if importlib.util.find_spec("matplotlib") else []
    compare = ["--baseline", args.baseline] + (["--fail-below-baseline"] if args.baseline.lower() != "none" else [])
    level_s = bounds["bench"] / len(levels)
    step = run.command_step(
        "bench", run.cli("bench", url, *py, "--concurrency", ",".join(map(str, levels)), "--ignore-eos", "--input-len",
                         "256", "--output-len", "256", "--timeout", f"{level_s:g}", *compare, *plot, *ask),
        bounds["bench"], work, "bench.json", _bench)
    if step.data and "baseline" in step.data:
        step.extra["comparison"] = step.data["baseline"]["comparison"]
    if not plot:
        step.evidence += "; no plot (matplotlib is not installed)"
    steps.append(step)
