"""`kernel build`: the sgl-kernel wheel from a checkout, without Nix (the seeds' uv venv setup).

Order matters: everything that can refuse does so before the tree is changed
or anything is compiled: source version, patch series (dry run), toolchain,
memory plan. Then the patches are applied (idempotently) and the wheel is
built by scikit-build-core without build isolation, so the pinned torch in
the venv is the one compiled against.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.errors import BuildError, StackError, ToolchainError
from blackwell_stack.kernel import jobs, patchcheck, recipe, toolchain
from blackwell_stack.paths import data_path
from blackwell_stack.progress import Progress

_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")


@dataclass
class SourceCheck:
    kernel_dir: Path
    version: str | None
    pinned_version: str
    git_rev: str | None
    pinned_rev: str
    warnings: list[str] = field(default_factory=list)


def kernel_sources() -> dict:
    return json.loads(data_path("pkgs", "sgl-kernel", "sources.json").read_text())


def pyproject_version(kernel_dir: Path) -> str | None:
    text = (kernel_dir / "pyproject.toml").read_text() if (kernel_dir / "pyproject.toml").is_file() else ""
    in_project = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            in_project = stripped == "[project]"
        elif in_project:
            m = re.match(r'version\s*=\s*"([^"]+)"', stripped)
            if m:
                return m.group(1)
    return None


def check_source(src: str | Path) -> SourceCheck:
    """Is the checkout the pinned sgl-kernel? Differences are warnings: a newer tree may still build."""
    kdir = patchcheck.kernel_dir(src)
    pins = kernel_sources()["sglang"]
    version = pyproject_version(kdir)
    rev = None
    try:
        r = proc.run(["git", "-C", str(kdir), "rev-parse", "HEAD"], check=False, timeout=30)
        rev = r.stdout.strip() if r.returncode == 0 else None
    except StackError:  # no git, or it hung
        rev = None
    check = SourceCheck(kdir, version, pins["sgl_kernel_version"], rev, pins["rev"])
    if version != check.pinned_version:
        check.warnings.append(
            f"{kdir}/pyproject.toml says sgl-kernel {version or '(no version)'}, the pin is {check.pinned_version} "
            f"(sglang {pins['tag']}); the patches and the recipe are made for the pin"
        )
    if rev is not None and rev != check.pinned_rev:
        check.warnings.append(f"the checkout is at {rev[:12]}, not at {pins['tag']} ({check.pinned_rev[:12]})")
    return check


@dataclass
class BuildPlan:
    source: SourceCheck
    archs: str
    job_plan: jobs.JobPlan
    host: jobs.Host
    defines: dict[str, str]
    env: dict[str, str]
    command: list[str]
    out_dir: Path
    log_path: Path
    patches_to_apply: list[str]
    patches_applied: list[str]
    series: list[patchcheck.Patch] | None = None  # None: patches/sgl-kernel

    def to_json(self) -> dict:
        return {
            "kernel_dir": str(self.source.kernel_dir),
            "source_version": self.source.version,
            "warnings": self.source.warnings,
            "archs": self.archs,
            "jobs": self.job_plan.jobs,
            "nvcc_threads": self.job_plan.threads,
            "planned_peak_mib": self.job_plan.planned_peak_mib,
            "available_mib": self.host.available_mib,
            "plan_note": self.job_plan.note,
            "patches_to_apply": self.patches_to_apply,
            "patches_already_applied": self.patches_applied,
            "defines": self.defines,
            "environment": self.env,
            "command": self.command,
            "log": str(self.log_path),
        }


def wheel_command(python: str, kernel_dir: Path, out_dir: Path, config_settings: list[str]) -> list[str]:
    """pip wheel without build isolation (the venv's pinned torch is compiled against), defines as -C settings."""
    return [
        python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--verbose",
        "--wheel-dir", str(out_dir),
        *[f"--config-settings={s}" for s in config_settings],
        str(kernel_dir),
    ]


def host_job_plan(rec: dict, arch: str, *, job_peak_mib: int | None = None,
                  max_jobs: int | None = None) -> tuple[jobs.Host, jobs.JobPlan]:
    """This host's memory-safe build jobs for the recipe (the rule of kernel/jobs.py)."""
    host = jobs.read_host()
    try:
        plan = jobs.plan(
            cores=host.cores,
            available_mib=host.available_mib,
            rule=jobs.rule_from_recipe(rec, job_peak_mib),
            archs=jobs.arch_count(arch),
            jobs=max_jobs,
        )
    except jobs.DoesNotFit as exc:
        raise ToolchainError(exc.message, exc.hint) from None
    return host, plan


def make_plan(
    src: str | Path,
    *,
    archs: str | None,
    out_dir: str | Path,
    python: str,
    max_jobs: int | None = None,
    job_peak_mib: int | None = None,
    warn=None,
    stack: str | None = None,
) -> BuildPlan:
    """Everything that can refuse, in order; changes nothing. `warn(text)` hears about a non-pinned source."""
    rec = recipe.load()
    arch = recipe.check_archs(rec, archs if archs else rec["arch"])  # unknown --arch: list the valid ones
    source = check_source(src)
    for text in source.warnings:
        if warn:
            warn(text)
    report = patchcheck.check_series(source.kernel_dir)
    if not report.ok:
        conflicts = [patchcheck.conflict_message(r) for r in report.hunks if r.state == patchcheck.CONFLICTING]
        raise BuildError(
            f"the sgl-kernel patch series does not apply to {source.kernel_dir}:\n" + "\n".join(conflicts or [str(report.patch_states())]),
            "check out sglang v0.5.9 afresh (`git -C SRC checkout -- sgl-kernel`); "
            "`blackwell-stack kernel patches check --src SRC` shows every hunk",
        )
    states = report.patch_states()
    toolchain.require_toolchain(python, stack)
    host, job_plan = host_job_plan(rec, arch, job_peak_mib=job_peak_mib, max_jobs=max_jobs)
    planned = {**job_plan.environment(), **job_plan.defines()}
    defines = recipe.defines(rec, arch, planned)
    env = recipe.environment(rec, arch, planned)
    out_dir = Path(out_dir).resolve()
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    log_path = out_dir / f"sgl-kernel-build-{stamp}.log"
    command = wheel_command(python, source.kernel_dir, out_dir, recipe.skbuild_config_settings(rec, arch, planned))
    return BuildPlan(
        source, arch, job_plan, host, defines, env, command, out_dir, log_path,
        [n for n, s in states.items() if s == patchcheck.APPLICABLE],
        [n for n, s in states.items() if s == patchcheck.APPLIED],
    )


def run_build(plan: BuildPlan, stream=None) -> Path:
    """Apply the patches, run the wheel build with a progress bar and a log; the wheel's path."""
    stream = stream or sys.stderr
    _, applied = patchcheck.apply_series(plan.source.kernel_dir, plan.series)
    for name in applied:
        print(f"applied {name}", file=stream)
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    before = set(plan.out_dir.glob("sgl_kernel-*.whl"))
    env = {**os.environ, **plan.env}
    tail: list[str] = []
    with open(plan.log_path, "w") as log, Progress("compiling sgl-kernel", None, unit="steps", stream=stream) as bar:
        log.write("$ " + " ".join(plan.command) + "\n" + json.dumps(plan.env) + "\n")
        try:
            child = proc.start(plan.command, env=env)
        except ToolchainError as exc:
            raise BuildError(exc.message, "pass --python with the venv's interpreter") from None
        assert child.stdout is not None  # proc.start always pipes stdout
        for line in child.stdout:
            log.write(line)
            tail = (tail + [line.rstrip()])[-40:]
            m = _NINJA_STEP.match(line.strip())
            if m:
                done, total = int(m.group(1)), int(m.group(2))
                bar.total = total
                bar.advance(done - bar.done)
        code = child.wait()
    if code != 0:
        errors = [t for t in tail if "error" in t.lower()] or tail[-10:]
        raise BuildError(
            f"the sgl-kernel build failed (exit code {code}); last errors:\n" + "\n".join("  " + e for e in errors[-10:]),
            f"the whole log is {plan.log_path}",
        )
    wheels = sorted(set(plan.out_dir.glob("sgl_kernel-*.whl")) - before) or sorted(plan.out_dir.glob("sgl_kernel-*.whl"))
    if not wheels:
        raise BuildError(f"the build finished but left no sgl_kernel wheel in {plan.out_dir}", f"see {plan.log_path}")
    return wheels[-1]
