"""The acceptance run's report: written once and whole, read back by `plan --report`.

A directory, made under a temporary name beside the final one and renamed into place when complete: report.json
(SCHEMA, versioned: each step's verdict, evidence, duration and bound; the versions the run checked), report.md (a
summary, the bench plot linked) and each step's own JSON. `plan --report FILE` marks the items that wait for the GPU
host as verified (by this host, on this date, with the report's sha256) when the step that checks each passed, and
only when the report is of the versions the plan is about (stack, uv.lock sha256, a profile of the stack, its kernel
version) and ran on the profile's GPUs (their number and compute capability) and, for the serving items, with its
model; for any other report it refuses those items, saying what differs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import tempfile
from pathlib import Path, PurePosixPath

from blackwell_stack import __version__, inputfiles
from blackwell_stack.data.plan import GPU_HOST, PlanSection
from blackwell_stack.data.profile import load_profile
from blackwell_stack.data.stack import Stack
from blackwell_stack.errors import StackError
from blackwell_stack.fileio import current_umask, write_error
from blackwell_stack.hashes import sha256_file
from blackwell_stack.verify.acceptance import FAILED, PASSED, SKIPPED, Step, run_bounded

SCHEMA = "blackwell-stack-acceptance"
SCHEMA_VERSION = 1
# A report is a few KiB (the steps' whole outputs are files beside it); far more is not one.
REPORT_LIMIT = 4 * inputfiles.MIB
PLOT = "bench.png"
# How an item verified by a report begins its `checked` (plan counts them).
VERIFIED = "verified by the"

# Prints the versions the interpreter would import, and where its kernel came from (PEP 610's direct_url.json
# holds the sha256 of the wheel a file install used), without importing any of them.
VERSIONS_PROBE = """
import importlib.metadata as m, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        dist = m.distribution(name)
    except m.PackageNotFoundError:
        out[name] = None
        continue
    out[name] = dist.version
    if name == sys.argv[-1]:
        try:
            archive = json.loads(dist.read_text("direct_url.json") or "{}").get("archive_info") or {}
        except ValueError:
            archive = {}
        digest = (archive.get("hashes") or {}).get("sha256") or (archive.get("hash") or "").removeprefix("sha256=")
        out["kernel_wheel_sha256"] = digest or None
print(json.dumps(out))
"""


def identity(stack: Stack, profile: str) -> dict:
    """What a report must match to stand for a plan's items: stack, lock, profile, kernel."""
    lock_hash = sha256_file(stack.lock_path) if stack.locked else None
    return {"stack": stack.name, "lock_sha256": lock_hash, "profile": profile,
            "kernel": {"package": stack.kernel["package"], "version": stack.kernel_version}}


def installed_versions(python: str, kernel_package: str) -> dict:
    names = ["sglang", "torch", "flashinfer-python", "flashinfer-cubin", kernel_package]
    code, out, tail = run_bounded([python, "-c", VERSIONS_PROBE, *names], 120.0, "versions")
    found = None
    with contextlib.suppress(ValueError):
        found = json.loads(out) if code == 0 else None
    if not isinstance(found, dict):
        return {"python": python, "error": (tail or ["no answer"])[-1]}
    return {"python": python, **found}


def build(stack: Stack, profile: str, *, steps: list[Step], versions: dict, date: str, mode: str, url: str,
          model: str | None, kernel_wheel: dict) -> dict:
    doctor = next((s.data for s in steps if s.name == "doctor" and s.data), None) or {}
    machine = doctor.get("host") or {}
    ok = bool(steps) and all(s.verdict == PASSED for s in steps)
    checked = {**versions, "locked": stack.versions() if stack.locked else None, "blackwell_stack": __version__}
    return {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "ok": ok, "host": socket.gethostname(), "date": date,
        **identity(stack, profile),
        "mode": mode, "url": url, "model": model, "versions": checked, "kernel_wheel": kernel_wheel,
        "driver": machine.get("driver"),
        "gpus": [{k: g.get(k) for k in ("name", "compute_cap", "driver", "memory_mib")} for g in machine.get("gpus", [])],
        "steps": [s.to_json() for s in steps],
    }


def markdown(report: dict) -> str:
    versions = report["versions"]
    gpus = ", ".join(f"{g['name']} ({g['compute_cap']})" for g in report["gpus"]) or "none found"
    lines = [
        f"# Acceptance run: {'passed' if report['ok'] else 'FAILED'}",
        "",
        f"- host: {report['host']}, {report['date']}",
        f"- stack: {report['stack']} (uv.lock sha256 `{report['lock_sha256']}`), profile {report['profile']}",
        f"- server: {report['url']} ({report['mode']}), model {report['model']}",
        f"- sglang {versions.get('sglang')}, torch {versions.get('torch')}, flashinfer "
        f"{versions.get('flashinfer-python')}, {report['kernel']['package']} {versions.get(report['kernel']['package'])} "
        f"(wheel sha256 {report['kernel_wheel'].get('sha256') or 'unknown'}: {report['kernel_wheel']['source']})",
        f"- GPUs: {gpus}; driver {report['driver']}",
        "",
        "| step | verdict | seconds | bound | evidence |",
        "|---|---|---|---|---|",
    ]
    for s in report["steps"]:
        evidence = s["evidence"].replace("|", "\\|").replace("\n", " ")
        link = f" ([{s['file']}]({s['file']}))" if s["file"] else ""
        lines.append(f"| {s['name']} | {s['verdict']} | {s['seconds']:g} | {s['bound_s'] or '-'} | {evidence}{link} |")
    return "\n".join(lines) + "\n"


def workdir(final: Path) -> Path:
    """Where the report is made: beside `final`, renamed into place by publish(). Made before any step runs, so
    that a report directory that exists or cannot be made is refused then."""
    if os.path.lexists(final):
        raise StackError(f"--report-dir {final} exists: a report is never written over another",
                         "pass a new directory (the default is acceptance-DATE in this directory)")
    try:
        return Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    except OSError as exc:
        raise write_error(final, exc) from None


def publish(work: Path, final: Path, report: dict) -> None:
    """report.json and report.md into work, then work renamed to final: all of it, or nothing."""
    try:
        (work / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        md = markdown(report)
        if (work / PLOT).is_file():
            md += f"\n![bench: throughput and latency against concurrency]({PLOT})\n"
        (work / "report.md").write_text(md)
        os.chmod(work, 0o777 & ~current_umask())
        os.rename(work, final)
    except OSError as exc:
        discard(work)
        raise write_error(final, exc) from None


def discard(work: Path) -> None:
    with contextlib.suppress(OSError):
        shutil.rmtree(work)


# ---------------------------------------------------------------- read back by `plan --report`


def load(path: str | Path) -> tuple[dict, str]:
    """The report at path (or in the report directory at path) and its sha256; a StackError that says what is
    wrong with anything else."""
    hint = "pass the report.json that `blackwell-stack acceptance` wrote"
    if os.path.isdir(path):
        path = Path(path) / "report.json"
    try:
        data = inputfiles.read_bytes(path, limit=REPORT_LIMIT, what="--report", hint=hint)
    except (FileNotFoundError, IsADirectoryError) as exc:
        raise StackError(f"--report {path}: {exc.strerror}", hint) from None
    try:
        report = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise StackError(f"--report {path} is not valid JSON ({exc})", hint) from None
    if not isinstance(report, dict) or report.get("schema") != SCHEMA:
        raise StackError(f"--report {path} is not an acceptance report (no \"schema\": \"{SCHEMA}\")", hint)
    if report.get("schema_version") != SCHEMA_VERSION:
        raise StackError(f"--report {path} has schema_version {report.get('schema_version')!r}; this plan reads "
                         f"{SCHEMA_VERSION}", "run the acceptance again with this version of blackwell-stack")
    shapes: dict[str, type | tuple[type, ...]] = {"host": str, "date": str, "stack": str, "profile": str,
                                                  "lock_sha256": (str, type(None)), "kernel": dict, "steps": list}
    wrong = [key for key, kind in shapes.items() if not isinstance(report.get(key), kind)]
    if wrong:
        raise StackError(f"--report {path}: {wrong[0]!r} is missing or not what an acceptance report holds", hint)
    bad = [s for s in report["steps"] if not isinstance(s, dict) or not isinstance(s.get("name"), str)
           or s.get("verdict") not in (PASSED, FAILED, SKIPPED) or not isinstance(s.get("evidence"), str)]
    if bad:
        raise StackError(f"--report {path}: a step is not a name, a verdict and its evidence: {str(bad[0])[:200]}",
                         hint)
    return report, hashlib.sha256(data).hexdigest()


def _differences(report: dict, want: dict) -> list[str]:
    found = []
    if report["stack"] != want["stack"]:
        return [f"it is of stack {report['stack']}, not {want['stack']}"]
    if report["lock_sha256"] != want["lock_sha256"]:
        found.append(f"its uv.lock had sha256 {str(report['lock_sha256'])[:16]}…, this one has "
                     f"{str(want['lock_sha256'])[:16]}…")
    if report["profile"] not in want["profiles"]:
        found.append(f"its profile {report['profile']} is not {' or '.join(want['profiles'])}")
    else:
        # A report stands for the profile's deployment only when it ran there: on its GPUs and, for the serving
        # items, with its model (a run on another card or with a stand-in model checks the commands, not this
        # deployment).
        profile = load_profile(report["profile"]).data
        hardware, model = profile["hardware"], profile["model"]["id"]
        gpus = [g for g in report.get("gpus") or [] if isinstance(g, dict)]
        caps = sorted({str(g.get("compute_cap")) for g in gpus})
        if len(gpus) != hardware["gpus"] or caps != [hardware["compute_capability"]]:
            found.append(f"it ran on {len(gpus)} GPU(s) of compute capability {', '.join(caps) or '-'}, not "
                         f"{hardware['gpus']} of {hardware['compute_capability']}")
        if want["serving"] and not _names_model(str(report.get("model")), model):
            found.append(f"its model {report.get('model')} is not {model}")
    if report["kernel"] != want["kernel"]:
        found.append(f"its kernel is {report['kernel'].get('package')} {report['kernel'].get('version')}, "
                     f"this stack's {want['kernel']['package']} {want['kernel']['version']}")
    return found


def _names_model(served: str, model_id: str) -> bool:
    """Whether the server's model name is the profile's model: its id, a directory of that name, or its Hugging
    Face cache entry (models--ORG--NAME/snapshots/REVISION)."""
    path = PurePosixPath(served)
    return served == model_id or path.name == PurePosixPath(model_id).name \
        or f"models--{model_id.replace('/', '--')}" in path.parts


def _section_stack(section: PlanSection, stacks: list[Stack]) -> tuple[Stack | None, list[str]]:
    """The stack a section of GPU-host items is about, and the profiles a report for it may be of."""
    if section.key == "verify":  # the default profile's smoke, gate and bench
        profile = load_profile().path.stem
        return next((s for s in stacks if profile in s.profiles), None), [profile]
    name = section.key.removeprefix("doctor-") if section.key.startswith("doctor-") else stacks[0].name
    stack = next((s for s in stacks if s.name == name), None)
    return stack, stack.profiles if stack else []


def _step_for(item_name: str) -> list[str]:
    """The steps that must have passed for a plan item to be verified."""
    if item_name == "accuracy gate":
        return ["accuracy"]
    if item_name.startswith("baseline: "):
        return ["bench"]
    kernel = ["kernel import"] if item_name.endswith((" ABI", " architectures")) else []
    return ["doctor", "stack doctor", *kernel]


def apply(report: dict, sha256: str, sections: list[PlanSection], stacks: list[Stack]) -> list[str]:
    """Mark the GPU-host items of sections the report stands for; what was refused, one line per section."""
    steps = {s["name"]: s for s in report["steps"]}
    refused = []
    by = f"acceptance run on {report['host']}, {report['date'][:10]} (report sha256 {sha256[:16]})"
    for section in sections:
        waiting = [i for i in section.items if i.needs == GPU_HOST]
        if not waiting:
            continue
        stack, profiles = _section_stack(section, stacks)
        if stack is None:
            refused.append(f"{section.key}: the report is not for a stack shown here (it is of {report['stack']})")
            continue
        want = {**identity(stack, report["profile"]), "profiles": profiles, "serving": section.key == "verify"}
        differ = _differences(report, want)
        if differ:
            refused.append(f"{section.key}: refused, the report is not of this deployment: {'; '.join(differ)}")
            continue
        for item in waiting:
            needed = _step_for(item.name)
            failed = [f"{n}: {steps[n]['evidence']}" if n in steps else f"{n}: not run"
                      for n in needed if steps.get(n, {}).get("verdict") != PASSED]
            if not failed and item.name.startswith("baseline: "):  # bench passed: did it reach this figure?
                rows = [r for r in steps["bench"].get("comparison") or [] if isinstance(r, dict)]
                row = next((r for r in rows if r.get("name") == item.name.removeprefix("baseline: ")), None)
                if row is None:
                    failed = ["bench: the bench step compared no figure with it"]
                elif row.get("status") != "ok":
                    failed = [f"bench: measured {row.get('measured')}: {row.get('status')}"]
            if failed:
                item.note = f"not {VERIFIED} {by}: {failed[0]}"
                continue
            item.needs, item.checked_by = None, f"{VERIFIED} {by}"
    return refused
