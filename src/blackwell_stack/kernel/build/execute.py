"""`kernel build`'s build itself, once make_plan found nothing that stops it (kernel/build/prepare.py).

The inputs are staged at the fixed path (kernel/build/staging.py): the checkout's sgl-kernel/ copied and patched
there (the checkout is never changed), the FetchContent sources linked or copied beside it; then the wheel is built
with a progress bar and a log, and refused when one of its libraries carries its own C++ runtime
(formats/cxxruntime.py): such a wheel crashed SGLang at start-up (benchmarks/sglang-gpu/).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.errors import BuildError, StackError, ToolchainError
from blackwell_stack.fileio import atomic_write_bytes
from blackwell_stack.formats import cxxruntime
from blackwell_stack.kernel.build import compilers, staging
from blackwell_stack.kernel.build.prepare import BuildPlan
from blackwell_stack.kernel.inputs import patch_series, sourcedir
from blackwell_stack.progress import Progress

_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")


# Left out of the staged copy of the checkout's sgl-kernel/: what a build there leaves, and git's own.
_NOT_STAGED = shutil.ignore_patterns(".git", "build", "dist", "__pycache__", "*.egg-info")


def run_build(plan: BuildPlan, stream=None) -> Path:
    """Stage the inputs, apply the patches to the staged copy, run the wheel build with a progress bar and a log,
    and check the wheel's libraries; the wheel's path."""
    stream = stream or sys.stderr
    if plan.blockers:
        raise plan.blockers[0]
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(plan.build_info_path, plan.build_info.encode())
    with staging.acquire(plan.stage) as stage:
        try:
            shutil.copytree(plan.source.kernel_dir, stage.kernel_dir, symlinks=True, ignore=_NOT_STAGED)
        except (OSError, shutil.Error) as exc:
            raise StackError(f"cannot copy {plan.source.kernel_dir} to {stage.kernel_dir}: {exc}",
                             f"free space under {stage.root.parent}") from None
        _, applied = patch_series.apply_series(stage.kernel_dir, plan.series)
        for name in applied:
            print(f"applied {name} (to the staged copy; {plan.source.kernel_dir} is unchanged)", file=stream)
        for source, dest, selected in plan.source_links:
            staging.link_tree(source, dest, sourcedir.filtered(selected, source))
        for copy in plan.source_copies:
            sourcedir.make_copy(copy)
            with_subs = f" with {', '.join(path for path, _ in copy.submodules)}" if copy.submodules else ""
            print(f"copied {copy.name}{with_subs} to {copy.dest} (the build edits it)", file=stream)
        print(f"staged the sources at {stage.root}", file=stream)
        wheel = _run_wheel_build(plan, stream)
    check_wheel(wheel)
    return wheel


def check_wheel(wheel: Path) -> None:
    """Refuse a wheel with no compiled library, or one whose libraries carry their own C++ runtime: moved aside to
    `<wheel>.rejected`, so that no `pip install dist/*.whl` takes it."""
    try:
        found = cxxruntime.check_wheel(wheel)
    except StackError as exc:
        raise BuildError(f"the built wheel {wheel} cannot be read: {exc.message}", exc.hint) from None
    bad = [(name, verdict) for name, verdict in found if not verdict.ok]
    if found and not bad:
        return
    rejected = wheel.with_name(wheel.name + ".rejected")
    wheel.replace(rejected)
    if not found:
        raise BuildError(f"the build made {wheel.name} with no compiled library in it (moved to {rejected.name})",
                         "see the build log: the CMake install step installed nothing")
    raise BuildError(
        f"the build made a wheel that would crash SGLang (moved to {rejected.name}):\n"
        + "\n".join("  " + verdict.message(name) for name, verdict in bad),
        "the compilers linked a static C++ runtime; " + compilers.DISTRIBUTION_FIX + ", then build again",
    )


def _run_wheel_build(plan: BuildPlan, stream) -> Path:
    before = set(plan.out_dir.glob("sgl_kernel-*.whl"))
    env = {**os.environ, **plan.env}
    tail: list[str] = []
    with open(plan.log_path, "w") as log, Progress("compiling sgl-kernel", None, unit="steps", stream=stream) as bar:
        log.write("$ " + " ".join(plan.command) + "\n" + json.dumps(plan.env, sort_keys=True) + "\n")
        for text in plan.warnings:
            log.write(f"warning: {text}\n")
        if plan.job_plan:
            log.write(f"job plan: {plan.job_plan.note}; worst case {plan.job_plan.planned_peak_mib} MiB of "
                      f"{plan.host.available_mib} MiB ({plan.host.source})\n")
        log.flush()
        try:
            child = proc.start(plan.command, env=env)
        except ToolchainError as exc:
            raise BuildError(exc.message, "pass --python with the venv's interpreter") from None
        assert child.stdout is not None  # proc.start always pipes stdout
        for line in child.stdout:
            log.write(line)
            tail = (tail + [line.rstrip()])[-40:]
            if m := _NINJA_STEP.match(line.strip()):
                bar.total = int(m.group(2))
                bar.advance(int(m.group(1)) - bar.done)
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
