"""`kernel build`: the sgl-kernel wheel from a checkout, without Nix (the seeds' uv venv setup).

`make_plan` decides everything and changes nothing: the source version, the
patch series (dry run), the FetchContent source directories (by hash), the
toolchain and the torch it must have, the memory plan, the exact CMake
defines and environment, and the build record. Whatever fails is kept as a
blocker instead of raised, so that `--dry-run` can show the whole plan and
every verdict; a real build stops at the first blocker, before the tree is
changed or anything is compiled. Then the patches are applied (idempotently)
and the wheel is built by scikit-build-core without build isolation, so the
venv's torch is the one compiled against.

Reproducibility: the recipe's settings (recipe.json) make nvcc's temporary
names, static archives and the wheel's timestamps deterministic; this module
adds -ffile-prefix-map flags that write the checkout, the FetchContent
directories and the build directory under fixed names. See docs/sgl-kernel.md.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from blackwell_stack import inputfiles, proc
from blackwell_stack.errors import BuildError, DataError, ExitCode, HashMismatch, StackError, ToolchainError
from blackwell_stack.fileio import atomic_write_bytes
from blackwell_stack.kernel import buildinfo, jobs, patchcheck, recipe, reference, sourcedir, sources, toolchain
from blackwell_stack.model.stack import Stack
from blackwell_stack.progress import Progress

_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")
# The environment variables CMake reads its initial compiler flags from; the
# prefix maps are appended to the recipe's values (CUDA's through -Xcompiler).
_FLAG_VARIABLES = ("CFLAGS", "CXXFLAGS", "CUDAFLAGS")


@dataclass
class SourceCheck:
    kernel_dir: Path
    version: str | None
    pinned_version: str
    git_rev: str | None
    pinned_rev: str
    warnings: list[str] = field(default_factory=list)


def kernel_sources() -> dict:
    """pkgs/sgl-kernel/sources.json, validated."""
    return sources.load()


def pyproject_version(kernel_dir: Path) -> str | None:
    pyproject = kernel_dir / "pyproject.toml"
    text = inputfiles.read_text(pyproject, limit=inputfiles.TEXT_FILE_LIMIT) if pyproject.is_file() else ""
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
    # Absolute: the prefix map must name the path CMake compiles from (a relative --src matched nothing).
    kdir = patchcheck.kernel_dir(src).resolve()
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
    job_plan: jobs.JobPlan | None
    host: jobs.Host
    defines: dict[str, str]
    env: dict[str, str]
    command: list[str]
    out_dir: Path
    log_path: Path
    patches_to_apply: list[str]
    patches_applied: list[str]
    series: list[patchcheck.Patch] | None = None  # None: patches/sgl-kernel
    build_dir: Path | None = None
    torch: toolchain.TorchExpectation | None = None
    checks: list[toolchain.Check] = field(default_factory=list)
    source_dirs: list[sourcedir.State] = field(default_factory=list)
    source_copies: list[sourcedir.Copy] = field(default_factory=list)  # made before CMake runs
    build_info: str | None = None  # the record's JSON text, written at build time
    reference: reference.ConfigVerdict | None = None  # this configuration against the reference wheel's
    warnings: list[str] = field(default_factory=list)
    blockers: list[StackError] = field(default_factory=list)  # in the order a real build stops

    @property
    def build_info_path(self) -> Path:
        return self.out_dir / buildinfo.FILE_NAME

    def to_json(self) -> dict:
        jp = self.job_plan
        return {
            "kernel_dir": str(self.source.kernel_dir),
            "source_version": self.source.version,
            "warnings": self.source.warnings + self.warnings,
            "archs": self.archs,
            "torch": self.torch.to_json() if self.torch else None,
            "jobs": jp.jobs if jp else None,
            "nvcc_threads": jp.threads if jp else None,
            "heavy_jobs": jp.heavy_jobs if jp else None,
            "heavy_sources": list(jp.heavy_sources) if jp else None,
            "planned_peak_mib": jp.planned_peak_mib if jp else None,
            "available_mib": self.host.available_mib,
            "memory_source": self.host.source,
            "plan_note": jp.note if jp else None,
            "patches_to_apply": self.patches_to_apply,
            "patches_already_applied": self.patches_applied,
            "source_dirs": [s.to_json() for s in self.source_dirs],
            "source_copies": [c.to_json() for c in self.source_copies],
            "defines": self.defines,
            "environment": self.env,
            "command": self.command,
            "build_dir": str(self.build_dir) if self.build_dir else None,
            "build_info": json.loads(self.build_info) if self.build_info else None,
            "reference": self.reference.to_json() if self.reference else None,
            "log": str(self.log_path),
            "checks": [{"name": c.name, "ok": c.ok, "found": c.found, "fix": c.fix} for c in self.checks],
            "blockers": [{"code": int(b.code), "message": b.message, "hint": b.hint} for b in self.blockers],
        }


def wheel_command(python: str, kernel_dir: Path, out_dir: Path, config_settings: list[str]) -> list[str]:
    """pip wheel without build isolation (the venv's pinned torch is compiled against), defines as -C settings."""
    return [
        python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--verbose",
        "--wheel-dir", str(out_dir),
        *[f"--config-settings={s}" for s in config_settings],
        str(kernel_dir),
    ]


def host_job_plan(rec: dict, arch: str, *, job_peak_mib: int | None = None, max_jobs: int | None = None,
                  memory_gib: float | None = None, cmake: str | None = None) -> tuple[jobs.Host, jobs.JobPlan]:
    """This host's memory-safe build jobs for the recipe (the rule of kernel/jobs.py).

    `cmake`: the cmake that will configure the build; heavy units get a ninja
    pool only when it is new enough (jobs.POOLS_MIN_CMAKE).
    """
    host = jobs.read_host(memory_mib=jobs.mib_of_gib(memory_gib))
    pools = jobs.cmake_has_pools(jobs.cmake_version(cmake)) if cmake else False
    try:
        plan = jobs.plan(
            cores=host.cores,
            available_mib=host.available_mib,
            rule=jobs.rule_from_recipe(rec, job_peak_mib),
            archs=jobs.arch_count(arch),
            jobs=max_jobs,
            pools=pools,
            copies=jobs.library_copies(arch),
        )
    except jobs.DoesNotFit as exc:
        raise ToolchainError(exc.message, exc.hint) from None
    return host, plan


def _with_prefix_maps(env: dict[str, str], maps: list[str]) -> dict[str, str]:
    """The recipe's compiler-flag variables with the prefix maps appended (CUDA's through -Xcompiler)."""
    out = dict(env)
    for name in _FLAG_VARIABLES:
        extra = [f"-Xcompiler={m}" for m in maps] if name == "CUDAFLAGS" else maps
        out[name] = " ".join(filter(None, [env.get(name, ""), *extra]))
    return out


def _source_directories(
    data: dict, arch: str, sources_dir: Path, allow_mismatch: list[str], warn: Callable[[str], None], copies_root: Path
) -> tuple[dict[str, str], list[sourcedir.State], list[StackError], dict, list[sourcedir.Copy]]:
    """FetchContent name -> directory, the states, blockers, the build record's sources block and the
    writable copies (under copies_root) the build reads instead of sources_dir."""
    archs = recipe.arch_list(arch)
    items = sourcedir.entries(data, archs)
    states = sourcedir.check(sources_dir, items)
    blockers: list[StackError] = []
    record: dict = {"from": "directory (--sources), checked by NAR hash", "pins": {}}
    unknown = sorted(set(allow_mismatch) - {s.entry.relpath for s in states})
    if unknown:
        blockers.append(StackError(f"--allow-source-mismatch {', '.join(unknown)}: no such source in this build",
                                   f"names this build reads: {', '.join(s.entry.relpath for s in states)}"))
    for s in states:
        name = s.entry.relpath
        pinned = s.entry.expected
        record["pins"][name] = {"rev": s.entry.pin.get("rev"), "pinned_hash": pinned, "hash": s.actual,
                                "accepted_mismatch": s.state != sourcedir.OK and name in allow_mismatch}
        if s.state == sourcedir.MISSING:
            blockers.append(StackError(
                f"{s.path} is missing (FetchContent source {name})",
                f"fetch it: blackwell-stack kernel sources fetch --dir {sources_dir} --arch {arch}",
            ))
        elif s.state in (sourcedir.MISMATCH, sourcedir.UNPINNED) and name not in allow_mismatch:
            what = "does not match its pin" if s.state == sourcedir.MISMATCH else "has no verified pin to check against"
            blockers.append(HashMismatch(
                f"{s.path} {what}: NAR hash {s.actual}, pin {pinned or '(none)'} ({s.entry.where})",
                f"replace it: remove it and run `blackwell-stack kernel sources fetch --dir {sources_dir}`; or build "
                f"with it on purpose: --allow-source-mismatch {name} (recorded in the wheel's build record)",
            ))
        elif s.state != sourcedir.OK:
            warn(f"building with {s.path}, which does not match its pin {s.entry.where} "
                 f"(NAR hash {s.actual}): accepted by --allow-source-mismatch {name}")
    copied = sourcedir.copies(sources_dir, data, archs, copies_root)
    return sourcedir.directories(sources_dir, data, archs, copied), states, blockers, record, copied


@dataclass(frozen=True)
class BuildRequest:
    """What `kernel build` is asked for: its command line, with the stack resolved."""

    src: str | Path | None  # the sglang checkout (or its sgl-kernel); None: SOURCES/sglang
    out_dir: str | Path
    python: str  # the venv's interpreter, whose torch is compiled against
    stack: Stack  # whose torch the kernel is built against
    archs: str | None = None  # None: the recipe's
    max_jobs: int | None = None
    job_peak_mib: int | None = None
    memory_gib: float | None = None
    sources_dir: str | Path | None = None
    build_dir: str | Path | None = None
    allow_torch: str | None = None
    allow_source_mismatch: tuple[str, ...] = ()


def make_plan(request: BuildRequest, warn: Callable[[str], None] | None = None) -> BuildPlan:
    """Everything a build would do, and every reason it would stop; changes nothing.

    Raises StackError only for input that leaves nothing to plan (no checkout, an
    unknown architecture); every other verdict is a blocker of the plan.
    """
    src, archs, out_dir, python, sources_dir, build_dir = (
        request.src, request.archs, request.out_dir, request.python, request.sources_dir, request.build_dir)
    say = warn or (lambda _text: None)
    rec = recipe.load()
    data = sources.load()
    arch = recipe.check_archs(rec, archs if archs else rec["arch"])  # unknown --arch: list the valid ones
    if src is None:
        if sources_dir is None or not (Path(sources_dir) / "sglang").is_dir():
            raise StackError("no sglang checkout given", "pass --src SGLANG, or --sources DIR holding DIR/sglang")
        src = Path(sources_dir) / "sglang"
    source = check_source(src)
    for text in source.warnings:
        say(text)
    blockers: list[StackError] = []
    warnings: list[str] = []

    def note(text: str) -> None:
        warnings.append(text)
        say(text)

    series = patchcheck.load_series()
    report = patchcheck.check_series(source.kernel_dir, series)
    if not report.ok:
        conflicts = [patchcheck.conflict_message(r) for r in report.hunks if r.state == patchcheck.CONFLICTING]
        blockers.append(BuildError(
            f"the sgl-kernel patch series does not apply to {source.kernel_dir}:\n" + "\n".join(conflicts or [str(report.patch_states())]),
            "check out sglang v0.5.9 afresh (`git -C SRC checkout -- sgl-kernel`); "
            "`blackwell-stack kernel patches check --src SRC` shows every hunk",
        ))
    states = report.patch_states()

    out_dir = Path(out_dir).resolve()
    build_dir = Path(build_dir).resolve() if build_dir else None
    fetchcontent: dict[str, str] = {}
    maps = [f"-ffile-prefix-map={source.kernel_dir}=sgl-kernel"]
    source_states: list[sourcedir.State] = []
    source_copies: list[sourcedir.Copy] = []
    # Writable copies of the sources CMake edits or that have submodules (FlashMLA) live in the build
    # directory, as in the derivation; without one, beside the wheel until the build ends.
    copies_root = build_dir / "fetchcontent" if build_dir is not None else out_dir / "sgl-kernel-fetchcontent"
    if sources_dir is not None:
        dirs, source_states, source_blockers, sources_record, source_copies = _source_directories(
            data, arch, Path(sources_dir), list(request.allow_source_mismatch), note, copies_root)
        blockers += source_blockers
        fetchcontent = sources.fetchcontent_settings(data, recipe.arch_list(arch), dirs)
        maps += sources.prefix_maps(data, recipe.arch_list(arch), dirs)
    else:
        sources_record = {"from": "downloaded by CMake at configure time (not checked against sources.json)"}
        note("no --sources: CMake downloads every FetchContent dependency from GitHub while it configures, "
             "unchecked; for an offline build pinned by hash, run `blackwell-stack kernel sources fetch --dir DIR` "
             "and pass --sources DIR")
    if build_dir is not None:
        maps.append(f"-ffile-prefix-map={build_dir}=build")
    for name in _FLAG_VARIABLES:
        if os.environ.get(name):
            note(f"{name}={os.environ[name]!r} from the environment is not used: the build's compiler flags are the "
                 "recipe's and the prefix maps (recipe.json environment), so that builds are the same everywhere")

    expected = toolchain.expected_torch(python, request.stack, request.allow_torch)
    if expected.override:
        note(f"building against torch {expected.version} instead of the stack's: {expected.source}; "
             "recorded in the wheel's sgl_kernel/_build_info.json")
    checks = toolchain.check_all(python, expected)
    error = toolchain.toolchain_error(checks)
    if error:
        blockers.append(error)
    cmake = toolchain.build_tool("cmake", python)
    try:
        host, job_plan = host_job_plan(rec, arch, job_peak_mib=request.job_peak_mib, max_jobs=request.max_jobs,
                                       memory_gib=request.memory_gib, cmake=cmake)
    except ToolchainError as exc:
        blockers.append(exc)
        host, job_plan = jobs.read_host(memory_mib=jobs.mib_of_gib(request.memory_gib)), None
    planned = {**job_plan.environment(), **job_plan.defines()} if job_plan else {}

    log_name = f"sgl-kernel-build-{_dt.datetime.now(_dt.UTC).strftime('%Y%m%dT%H%M%SZ')}.log"
    defines = recipe.defines(rec, arch, planned)
    defines.update(fetchcontent)
    defines["SGL_KERNEL_BUILD_INFO_FILE"] = str(out_dir / buildinfo.FILE_NAME)
    env = _with_prefix_maps(recipe.environment(rec, arch, planned), maps)
    settings = [f"cmake.define.{name}={value}" for name, value in sorted(defines.items())]
    if build_dir is not None:
        settings.insert(0, f"build-dir={build_dir}")
    found = {c.name: c.value for c in checks}
    if jobs.version_at_least(found.get("scikit-build-core"), (1, 0)):
        # Normalised wheel timestamps and modes (scikit-build-core >= 1.0; older ones refuse the key).
        settings.insert(0, "wheel.reproducible=true")
    command = wheel_command(python, source.kernel_dir, out_dir, settings)

    record = buildinfo.render(
        sgl_kernel_version=source.version,
        sglang_pin=data["sglang"],
        cuda_archs=arch,
        defines=recipe.defines(rec, arch),
        environment=recipe.environment(rec, arch),
        series=series,
        sources=sources_record,
        torch={"built_against": found.get("torch"), **expected.to_json()},
        toolchain={k: v for k, v in found.items() if k in ("nvcc", "cmake", "scikit-build-core") and v},
    )
    try:
        conditions = reference.conditions_of(
            kernel_dir=source.kernel_dir, sources_dir=Path(sources_dir).resolve() if sources_dir is not None else None,
            python=python, checks=checks, environ=os.environ)
        verdict: reference.ConfigVerdict | None = reference.compare_configuration(reference.load(), record, conditions)
    except DataError as exc:
        blockers.append(exc)
        verdict = None
    return BuildPlan(
        source, arch, job_plan, host, defines, env, command, out_dir, out_dir / log_name,
        [n for n, s in states.items() if s == patchcheck.APPLICABLE],
        [n for n, s in states.items() if s == patchcheck.APPLIED],
        series=series, build_dir=build_dir, torch=expected, checks=checks, source_dirs=source_states,
        source_copies=source_copies, build_info=record, reference=verdict, warnings=warnings, blockers=blockers,
    )


def run_build(plan: BuildPlan, stream=None) -> Path:
    """Apply the patches, run the wheel build with a progress bar and a log; the wheel's path."""
    stream = stream or sys.stderr
    if plan.blockers:
        raise plan.blockers[0]
    _, applied = patchcheck.apply_series(plan.source.kernel_dir, plan.series)
    for name in applied:
        print(f"applied {name}", file=stream)
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    if plan.build_info is not None:
        atomic_write_bytes(plan.build_info_path, plan.build_info.encode())
    for copy in plan.source_copies:
        sourcedir.make_copy(copy)
        with_subs = f" with {', '.join(path for path, _ in copy.submodules)}" if copy.submodules else ""
        print(f"copied {copy.name}{with_subs} to {copy.dest} (the build edits it)", file=stream)
    try:
        return _run_wheel_build(plan, stream)
    finally:
        if plan.build_dir is None:  # copies beside the wheel go; a build directory keeps them with the rest
            for copy in plan.source_copies:
                shutil.rmtree(copy.dest.parent, ignore_errors=True)


def _run_wheel_build(plan: BuildPlan, stream) -> Path:
    before = set(plan.out_dir.glob("sgl_kernel-*.whl"))
    env = {**os.environ, **plan.env}
    tail: list[str] = []
    with open(plan.log_path, "w") as log, Progress("compiling sgl-kernel", None, unit="steps", stream=stream) as bar:
        log.write("$ " + " ".join(plan.command) + "\n" + json.dumps(plan.env, sort_keys=True) + "\n")
        for text in plan.source.warnings + plan.warnings:
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


def blocker_exit_code(plan: BuildPlan) -> int:
    return int(plan.blockers[0].code) if plan.blockers else int(ExitCode.OK)
