"""`kernel build`: the sgl-kernel wheel from a checkout, without Nix (the seeds' uv venv setup).

`make_plan` decides everything and changes nothing: the source version, the patch series (dry run), the FetchContent
source directories (by hash), the toolchain and the torch it must have, the memory plan, the exact CMake defines and
environment, and the build record. Whatever fails is kept as a blocker instead of raised, so that `--dry-run` can
show the whole plan and every verdict; a real build stops at the first blocker, before the tree is changed or
anything is compiled. Then the patches are applied (idempotently) and the wheel is built by scikit-build-core
without build isolation, so the venv's torch is the one compiled against.

Reproducibility: the recipe's settings (recipe.json) make nvcc's temporary names, static archives and the wheel's
timestamps deterministic; the build compiles from a copy of its inputs at one fixed path (kernel/build/staging.py:
nvcc names internal entities after a .cu file's real path), and this module adds -ffile-prefix-map flags that write
the stage, torch's site-packages, the CUDA toolkit and the build directory under fixed names. The compilers are
tried and pinned (kernel/build/compilers.py), and the wheel is refused when one of its libraries carries its own C++
runtime. See docs/sgl-kernel.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from blackwell_stack import inputfiles, proc
from blackwell_stack.data.stack import Stack
from blackwell_stack.errors import DataError, HashMismatch, StackError, ToolchainError
from blackwell_stack.kernel import jobs
from blackwell_stack.kernel.build import compilers, staging, toolchain
from blackwell_stack.kernel.inputs import patch_series, recipe, sourcedir, sources
from blackwell_stack.kernel.inputs.source_filter import Filter
from blackwell_stack.kernel.reproducibility import buildinfo, reference
from blackwell_stack.kernel.reproducibility.conditions import conditions_of

# The environment variables CMake reads its initial compiler flags from; the
# prefix maps are appended to the recipe's values (CUDA's through -Xcompiler).
_FLAG_VARIABLES = ("CFLAGS", "CXXFLAGS", "CUDAFLAGS")


@dataclass
class SourceCheck:
    kernel_dir: Path
    version: str | None  # its pyproject.toml's
    warnings: list[str] = field(default_factory=list)


def check_source(src: str | Path) -> SourceCheck:
    """Is the checkout the pinned sgl-kernel? Differences are warnings: a newer tree may still build."""
    # Absolute: the prefix map must name the path CMake compiles from (a relative --src matched nothing).
    kdir = patch_series.kernel_dir(src).resolve()
    pin = sources.load()["sglang"]
    pyproject = kdir / "pyproject.toml"
    try:
        text = inputfiles.read_text(pyproject, limit=inputfiles.TEXT_FILE_LIMIT) if pyproject.is_file() else ""
        version = tomllib.loads(text).get("project", {}).get("version")
    except (tomllib.TOMLDecodeError, AttributeError):  # not TOML, or a [project] that is not a table
        version = None
    check = SourceCheck(kdir, version if isinstance(version, str) else None)
    if check.version != pin["sgl_kernel_version"]:
        check.warnings.append(
            f"{kdir}/pyproject.toml says sgl-kernel {check.version or '(no version)'}, the pin is "
            f"{pin['sgl_kernel_version']} (sglang {pin['tag']}); the patches and the recipe are made for the pin"
        )
    code, rev = proc.probe(["git", "-C", str(kdir), "rev-parse", "HEAD"], timeout=30, stdout_only=True)
    if code == 0 and rev != pin["rev"]:  # not when it is no git checkout, there is no git, or it hung
        check.warnings.append(f"the checkout is at {rev[:12]}, not at {pin['tag']} ({pin['rev'][:12]})")
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
    series: list[patch_series.Patch]
    build_dir: Path
    stage: staging.Layout  # where the inputs are placed for the build
    build_info: str  # the record's JSON text, written at build time
    # read-only sources: (from, staged at, the part its pin covers)
    source_links: list[tuple[Path, Path, Filter | None]] = field(default_factory=list)
    torch: toolchain.TorchExpectation | None = None
    checks: list[toolchain.Check] = field(default_factory=list)
    source_dirs: list[sourcedir.State] = field(default_factory=list)
    source_copies: list[sourcedir.Copy] = field(default_factory=list)  # made before CMake runs
    reference: reference.ConfigVerdict | None = None  # this configuration against the reference wheel's
    conditions: dict[str, str | None] = field(default_factory=dict)  # what a reference records of this build
    warnings: list[str] = field(default_factory=list)  # the source's first
    blockers: list[StackError] = field(default_factory=list)  # in the order a real build stops

    @property
    def build_info_path(self) -> Path:
        return self.out_dir / buildinfo.FILE_NAME

    def to_json(self) -> dict:
        jp = self.job_plan
        return {
            "kernel_dir": str(self.source.kernel_dir),
            "stage": str(self.stage.root),
            "source_version": self.source.version,
            "warnings": self.warnings,
            "archs": self.archs,
            "torch": self.torch and self.torch.to_json(),
            "jobs": jp and jp.jobs,
            "nvcc_threads": jp and jp.threads,
            "heavy_jobs": jp and jp.heavy_jobs,
            "heavy_sources": jp and list(jp.heavy_sources),
            "planned_peak_mib": jp and jp.planned_peak_mib,
            "available_mib": self.host.available_mib,
            "memory_source": self.host.source,
            "plan_note": jp and jp.note,
            "patches_to_apply": self.patches_to_apply,
            "patches_already_applied": self.patches_applied,
            "source_dirs": [s.to_json() for s in self.source_dirs],
            "source_copies": [c.to_json() for c in self.source_copies],
            "defines": self.defines,
            "environment": self.env,
            "command": self.command,
            "build_dir": str(self.build_dir),
            "build_info": json.loads(self.build_info),
            "reference": self.reference and self.reference.to_json(),
            "conditions": self.conditions,
            "log": str(self.log_path),
            "checks": [{"name": c.name, "ok": c.ok, "found": c.found, "fix": c.fix} for c in self.checks],
            "blockers": [{"code": int(b.code), "message": b.message, "hint": b.hint} for b in self.blockers],
        }


def wheel_command(python: str, kernel_dir: Path, out_dir: Path, config_settings: list[str]) -> list[str]:
    # Without build isolation: the venv's pinned torch is the one compiled against.
    return [
        python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--verbose",
        "--wheel-dir", str(out_dir),
        *[f"--config-settings={s}" for s in config_settings],
        str(kernel_dir),
    ]


def _with_prefix_maps(env: dict[str, str], maps: list[str]) -> dict[str, str]:
    out = dict(env)
    for name in _FLAG_VARIABLES:
        extra = [f"-Xcompiler={m}" for m in maps] if name == "CUDAFLAGS" else maps
        out[name] = " ".join(filter(None, [env.get(name, ""), *extra]))
    return out


def _check_sources(states: list[sourcedir.State], sources_dir: Path, arch: str, allow_mismatch: Sequence[str],
                   warn: Callable[[str], None]) -> tuple[list[StackError], dict]:
    blockers: list[StackError] = []
    record: dict = {"from": "directory (--sources), checked by NAR hash", "pins": {}}
    unknown = sorted(set(allow_mismatch) - {s.entry.relpath for s in states})
    if unknown:
        blockers.append(StackError(f"--allow-source-mismatch {', '.join(unknown)}: no such source in this build",
                                   f"names this build reads: {', '.join(s.entry.relpath for s in states)}"))
    for s in states:
        name = s.entry.relpath
        record["pins"][name] = buildinfo.source_pin(s.entry, s.actual, s.state != sourcedir.OK and name in allow_mismatch)
        if s.state == sourcedir.MISSING:
            blockers.append(StackError(
                f"{s.path} is missing (FetchContent source {name})",
                f"fetch it: blackwell-stack kernel sources fetch --dir {sources_dir} --arch {arch}",
            ))
        elif s.state in (sourcedir.MISMATCH, sourcedir.UNPINNED) and name not in allow_mismatch:
            what = "does not match its pin" if s.state == sourcedir.MISMATCH else "has no verified pin to check against"
            blockers.append(HashMismatch(
                f"{s.path} {what}: NAR hash {s.actual}, pin {s.entry.expected or '(none)'} ({s.entry.where})",
                f"replace it: remove it and run `blackwell-stack kernel sources fetch --dir {sources_dir}`; or build "
                f"with it on purpose: --allow-source-mismatch {name} (recorded in the wheel's build record)",
            ))
        elif s.state != sourcedir.OK:
            warn(f"building with {s.path}, which does not match its pin {s.entry.where} "
                 f"(NAR hash {s.actual}): accepted by --allow-source-mismatch {name}")
    return blockers, record


def make_plan(request: argparse.Namespace, stack: Stack, say: Callable[[str], None]) -> BuildPlan:
    """Everything a build would do, and every reason it would stop; changes nothing. Raises StackError only for
    input that leaves nothing to plan (no checkout, an unknown architecture); every other verdict is a blocker."""
    src, python, sources_dir = request.src, request.python, request.sources
    rec = recipe.load()
    data = sources.load()
    arch = recipe.check_archs(rec, request.arch or rec["arch"])  # unknown --arch: list the valid ones
    archs = recipe.arch_list(arch)
    if src is None:
        if sources_dir is None or not (Path(sources_dir) / "sglang").is_dir():
            raise StackError("no sglang checkout given", "pass --src SGLANG, or --sources DIR holding DIR/sglang")
        src = Path(sources_dir) / "sglang"
    source = check_source(src)
    blockers: list[StackError] = []
    warnings: list[str] = []

    def note(text: str) -> None:
        warnings.append(text)
        say(text)

    for text in source.warnings:
        note(text)
    series = patch_series.load_series()
    try:
        report = patch_series.check_series(source.kernel_dir, series)
    except ToolchainError:  # no GNU patch: the toolchain check below says what to install
        report = None
    if report and (error := report.error()):
        blockers.append(error)
    states = report.patch_states() if report else {}

    out_dir = Path(request.out).resolve()
    stage = staging.layout()
    if stage.root != staging.STAGE_ROOT:
        note(f"the sources are staged at {stage.root} ({staging.ROOT_VARIABLE}), not {staging.STAGE_ROOT}: nvcc names "
             "internal entities after their paths, so this wheel cannot be the reference wheel")
    # The build directory: the one asked for, else inside the stage (a fixed path too).
    build_dir = Path(request.build_dir).resolve() if request.build_dir else stage.build_dir
    fetchcontent: dict[str, str] = {}
    maps = [f"-ffile-prefix-map={stage.kernel_dir}=sgl-kernel"]
    source_states: list[sourcedir.State] = []
    source_copies: list[sourcedir.Copy] = []
    source_links: list[tuple[Path, Path, Filter | None]] = []
    if sources_dir is not None:
        base = Path(sources_dir)
        source_states = sourcedir.check(base, sourcedir.entries(data, archs))
        source_blockers, sources_record = _check_sources(source_states, base, arch, request.allow_source_mismatch, note)
        blockers += source_blockers
        # Each dependency staged: copied where the build writes into it, linked otherwise.
        source_copies = sourcedir.copies(base, data, archs, stage.sources_dir)
        names = sources.needed_names(data, archs)
        source_links = [(base.resolve() / name, stage.sources_dir / name, Filter.of(data["fetchcontent"][name]))
                        for name in names if name not in {c.name for c in source_copies}]
        dirs = {name: str(stage.sources_dir / name) for name in names}
        fetchcontent = sources.fetchcontent_settings(data, archs, dirs)
        maps += sources.prefix_maps(data, archs, dirs)
    else:
        sources_record = {"from": "downloaded by CMake at configure time (not checked against sources.json)"}
        note("no --sources: CMake downloads every FetchContent dependency from GitHub while it configures, "
             "unchecked; for an offline build pinned by hash, run `blackwell-stack kernel sources fetch --dir DIR` "
             "and pass --sources DIR")
    maps.append(f"-ffile-prefix-map={build_dir}=build")
    for name in _FLAG_VARIABLES:
        if os.environ.get(name):
            note(f"{name}={os.environ[name]!r} from the environment is not used: the build's compiler flags are the "
                 "recipe's and the prefix maps (recipe.json environment), so that builds are the same everywhere")

    expected = toolchain.expected_torch(python, stack, request.allow_torch)
    if expected.override:
        note(f"building against torch {expected.version} instead of the stack's: {expected.source}; "
             "recorded in the wheel's sgl_kernel/_build_info.json")
    found_compilers = compilers.find()
    checks = toolchain.check_all(python, expected, found_compilers)
    maps += _toolchain_prefix_maps(checks)
    if toolchain_error := toolchain.toolchain_error(checks):
        blockers.append(toolchain_error)
    found = {c.name: c.value for c in checks}
    host = jobs.read_host(memory_gib=request.memory_gib)
    try:  # heavy units get a ninja pool only when the cmake that configures the build is new enough
        job_plan = jobs.recipe_plan(rec, arch, host, jobs=request.jobs, job_peak_mib=request.job_peak_mib,
                                    pools=jobs.cmake_has_pools(found.get("cmake")))
    except jobs.DoesNotFit as exc:
        blockers.append(ToolchainError(exc.message, exc.hint))
        job_plan = None
    planned = {**job_plan.environment(), **job_plan.defines()} if job_plan else {}

    defines = {**recipe.defines(rec, arch, planned), **fetchcontent, **compilers.defines(found_compilers),
               "SGL_KERNEL_BUILD_INFO_FILE": str(out_dir / buildinfo.FILE_NAME)}
    env = {**_with_prefix_maps(recipe.environment(rec, arch, planned), maps),
           **_tool_environment(checks, found_compilers)}
    settings = [f"build-dir={build_dir}", *(f"cmake.define.{name}={value}" for name, value in sorted(defines.items()))]
    if jobs.version_at_least(found.get("scikit-build-core"), (1, 0)):
        # Normalised wheel timestamps and modes (scikit-build-core >= 1.0; older ones refuse the key).
        settings.insert(0, "wheel.reproducible=true")
    command = wheel_command(python, stage.kernel_dir, out_dir, settings)

    record = buildinfo.render(
        rec, arch, sgl_kernel_version=source.version, sglang_pin=data["sglang"], series=series, sources=sources_record,
        torch={"built_against": found.get("torch"), **expected.to_json()},
        toolchain={**{k: v for k, v in found.items() if k in ("nvcc", "cmake", "scikit-build-core") and v},
                   **compilers.record(found_compilers)},
    )
    verdict: reference.ConfigVerdict | None = None
    conditions = conditions_of(stage=stage.root, checks=checks, compilers=found_compilers)
    try:
        doc = reference.document()
        if doc.current is None:
            note(f"no reference wheel to compare with: {doc.reason}")
        else:
            verdict = reference.compare_configuration(doc.current, record, conditions)
    except DataError as exc:
        # The reference only compares: an unreadable one is said, and the build goes on without the comparison.
        note(f"no comparison with the reference wheel: {exc.message}")
    return BuildPlan(
        source, arch, job_plan, host, defines, env, command, out_dir,
        out_dir / f"sgl-kernel-build-{_dt.datetime.now(_dt.UTC).strftime('%Y%m%dT%H%M%SZ')}.log",
        [n for n, s in states.items() if s == patch_series.APPLICABLE],
        [n for n, s in states.items() if s == patch_series.APPLIED],
        series=series, build_dir=build_dir, stage=stage, build_info=record, source_links=source_links, torch=expected, checks=checks,
        source_dirs=source_states, source_copies=source_copies, reference=verdict,
        conditions=conditions, warnings=warnings, blockers=blockers,
    )


def _toolchain_prefix_maps(checks: list[toolchain.Check]) -> list[str]:
    """Prefix maps for the headers outside the stage: torch's (its site-packages, as imported and resolved) and the
    CUDA toolkit's. Their paths reach the libraries through __FILE__ only (nvcc's internal names follow the
    .cu file's path, which the stage fixes)."""
    maps = [f"-ffile-prefix-map={site}=site-packages" for c in checks if c.name == "torch" for site in c.paths]
    nvcc = toolchain.nvcc_path()
    if nvcc:
        # The toolkit's root holds include/cuda_runtime.h; nvcc may be a link from elsewhere (/usr/local/bin).
        roots = [root for root in dict.fromkeys(Path(p).parent.parent for p in (os.path.realpath(nvcc), nvcc))
                 if (root / "include" / "cuda_runtime.h").is_file()]
        maps += [f"-ffile-prefix-map={root}=cuda" for root in roots]
    return maps


def _tool_environment(checks: list[toolchain.Check], found: list[compilers.Compiler]) -> dict[str, str]:
    """What makes scikit-build-core use the tools that were checked: the cmake found beside the venv's Python
    (scikit-build-core would take the first `cmake` on PATH, which may be older), and the compilers (it sets CC
    and CXX from Python's own sysconfig when they are unset; CMake is given them by path as well)."""
    env = {c.role.variable: c.path for c in found if c.ok and c.path}
    cmake = next((c for c in checks if c.name == "cmake" and c.ok and c.paths), None)
    if cmake is not None:
        env["CMAKE_EXECUTABLE"] = cmake.paths[0]
    return env
