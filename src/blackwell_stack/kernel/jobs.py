"""Memory-safe build parallelism for sgl-kernel: jobs, nvcc threads and a ninja pool for heavy units.

The ONE implementation of the rule stated in pkgs/sgl-kernel/recipe.json (`memory.rule`, measured in
benchmarks/kernel-compile-memory/): `blackwell-stack kernel build` uses it as a module, the Nix derivation at
build time as a script (only the builder knows its memory). Standard library only, no blackwell_stack imports:

    python3 src/blackwell_stack/kernel/jobs.py --recipe pkgs/sgl-kernel/recipe.json \
        --cores "$NIX_BUILD_CORES" --cmake cmake --format shell

prints `NAME=VALUE` lines (CMAKE_BUILD_PARALLEL_LEVEL, MAX_JOBS) and a bash array `plannedCmakeFlags=(-D...)`
to eval, and exits 6 with the reason on stderr when not even the largest compile fits.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath

EXIT_DOES_NOT_FIT = 6  # blackwell_stack.errors.ExitCode.TOOLCHAIN: the host is wrong for the job
EXIT_USAGE = 2
POOL = "sgl_kernel_heavy"
POOLS_MIN_CMAKE = (4, 2)  # per-source JOB_POOL_COMPILE (CMake 4.2 release notes)


class DoesNotFit(Exception):
    """Not even the largest compile, alone with one nvcc thread, fits in the memory given."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class Host:
    """What the build host offers, and where each figure came from."""

    cores: int
    mem_available_mib: int  # MemAvailable from /proc/meminfo
    cgroup_free_mib: int | None  # memory.max - memory.current of the tightest cgroup, if limited
    swap_free_mib: int
    source: str
    memory_override_mib: int | None = None  # an explicit figure (--memory-gib) instead of the two above

    @property
    def available_mib(self) -> int:
        if self.memory_override_mib is not None:
            return self.memory_override_mib
        if self.cgroup_free_mib is None:
            return self.mem_available_mib
        return min(self.mem_available_mib, self.cgroup_free_mib)


@dataclass(frozen=True)
class MemoryRule:
    per_thread_peak_mib: int  # the largest measured peak of one compile
    headroom_mib: int
    headroom_fraction: float
    unit_peaks_mib: Mapping[str, int] = field(default_factory=dict)  # source (relative to sgl-kernel/) -> MiB
    unlisted_peak_mib: int | None = None  # the charge of a unit not in unit_peaks_mib; None: per_thread_peak_mib
    heavy_unit_mib: int | None = None  # listed units charged more than this go to the pool; None: no pool
    heavy_pool_share: float = 0.5

    def reserve_mib(self, available_mib: int) -> int:
        return max(self.headroom_mib, math.ceil(available_mib * self.headroom_fraction))

    def heavy_units(self) -> list[tuple[str, int]]:
        """(source, peak) of the pooled units, largest first (ties by name, so plans are stable)."""
        if self.heavy_unit_mib is None:
            return []
        return sorted(((s, p) for s, p in self.unit_peaks_mib.items() if p > self.heavy_unit_mib),
                      key=lambda item: (-item[1], item[0]))

    @property
    def unlisted_mib(self) -> int:
        return self.unlisted_peak_mib if self.unlisted_peak_mib is not None else self.per_thread_peak_mib


@dataclass(frozen=True)
class JobPlan:
    jobs: int
    threads: int
    archs: int
    available_mib: int
    reserve_mib: int
    per_thread_peak_mib: int  # charge of an unlisted unit (MemoryRule.unlisted_mib)
    planned_peak_mib: int  # the worst case the plan allows: never above available - reserve
    note: str
    heavy_jobs: int = 0  # depth of the ninja pool (0: no pool)
    heavy_sources: tuple[str, ...] = ()
    light_charge_mib: int = 0  # the largest charge of a compile outside the pool (x min(threads, archs))

    def environment(self) -> dict[str, str]:
        return {"CMAKE_BUILD_PARALLEL_LEVEL": str(self.jobs), "MAX_JOBS": str(self.jobs)}

    def defines(self) -> dict[str, str]:
        out = {"SGL_KERNEL_COMPILE_THREADS": str(self.threads)}
        if self.heavy_jobs:
            out["SGL_KERNEL_JOB_POOLS"] = f"{POOL}={self.heavy_jobs}"
            out["SGL_KERNEL_JOB_POOL_SOURCES"] = ",".join(f"{s}={POOL}" for s in sorted(self.heavy_sources))
        return out


def _top_sum(listed: Iterable[int], unlisted: int, n: int) -> int:
    """The largest total n compiles can hold: each listed charge at most once, unlisted ones any number of times."""
    total, taken = 0, 0
    for charge in sorted(listed, reverse=True):
        if taken == n or charge <= unlisted:
            break
        total, taken = total + charge, taken + 1
    return total + (n - taken) * unlisted


def plan(
    *,
    cores: int,
    available_mib: int,
    rule: MemoryRule,
    archs: int = 1,
    jobs: int | None = None,
    pools: bool = False,
    copies: int = 1,
) -> JobPlan:
    """The widest plan that fits; `jobs` caps it (never raises it past the memory).

    `pools`: whether the build can put heavy units in a ninja pool (CMake >= 4.2, Ninja).
    `copies`: how many libraries compile each source (library_copies: 2 when both
    common_ops variants are built), so that many compiles of one unit may run at once.
    """
    if jobs is not None and jobs < 1:
        raise ValueError("jobs must be at least 1")
    cores = max(1, cores)
    archs = max(1, archs)
    copies = max(1, copies)
    reserve = rule.reserve_mib(max(0, available_mib))
    budget = available_mib - reserve
    heavy_units = rule.heavy_units() if pools else []

    def attempt(n_threads: int) -> tuple[int, int, int, int] | None:
        """(jobs, pool depth, worst case, light charge) with n_threads, or None when nothing fits."""
        scale = min(n_threads, archs)
        cap = min(cores // scale, jobs if jobs is not None else cores)  # no more cicc processes than cores
        unlisted = rule.unlisted_mib * scale
        pooled_names = {s for s, _ in heavy_units}
        heavy = sorted((p * scale for _, p in heavy_units for _ in range(copies)), reverse=True)
        light = [p * scale for s, p in rule.unit_peaks_mib.items() if s not in pooled_names for _ in range(copies)]
        depth = 0
        if heavy_units:  # as many of the largest as fit in the pool's share of the budget, at least one
            share = max(budget * rule.heavy_pool_share, heavy[0])
            depth = max(k for k in range(1, len(heavy) + 1) if sum(heavy[:k]) <= share)
        # At most `depth` of the n compiles heavy (the largest ones), the rest light or unlisted.
        fits = [n for n in range(1, cap + 1) if _top_sum(heavy[:depth] + light, unlisted, n) <= budget]
        if not fits:
            return None
        return fits[-1], depth, _top_sum(heavy[:depth] + light, unlisted, fits[-1]), max([unlisted, *light])

    first = attempt(1)
    if first is None:
        largest = max([rule.unlisted_mib, *rule.unit_peaks_mib.values()])
        raise DoesNotFit(
            f"not enough memory to compile sgl-kernel: its largest compile (one job, one nvcc thread) needs "
            f"{largest} MiB, and {max(budget, 0)} MiB are usable "
            f"({available_mib} MiB available less a reserve of {reserve} MiB)",
            "free memory (stop other programs), build on a host with more memory, or raise the "
            "cgroup/container memory limit; if the host reports less memory than it has, give the figure "
            "with --memory-gib; if your own measurement of the per-unit peaks is lower, pass the charge of "
            "units without a measured peak with --job-peak-mib (recipe.json memory.unlisted_unit_peak_mib)",
        )
    n_jobs, depth, worst, light = first
    n_threads = 1
    # Threads only help over several targets, and only while the planned jobs still fit.
    for t in range(2, archs + 1):
        more = attempt(t)
        if more is None or more[0] < n_jobs:
            break
        n_threads, (_, depth, worst, light) = t, more
    limited_by = "cores" if n_jobs >= min(cores, jobs or cores) else "memory"
    note = f"{n_jobs} job(s) fit, limited by {limited_by}"
    if depth:
        note += f"; the {depth} largest of {len(heavy_units)} heavy units at a time in ninja pool {POOL}"
    if jobs is not None and jobs > n_jobs:
        note += f"; --jobs {jobs} lowered to {n_jobs}: more would not fit in memory or cores"
    return JobPlan(
        n_jobs, n_threads, archs, available_mib, reserve, rule.unlisted_mib, worst, note,
        depth, tuple(s for s, _ in heavy_units) if depth else (), light,
    )


# -- The recipe's memory section


def memory_problems(memory: object) -> list[tuple[str, str]]:
    """(field, problem) for every way recipe.json's `memory` object is unusable; [] when it is fine."""
    if not isinstance(memory, dict):
        return [("memory", "must be an object")]
    out = []

    def number(name: str, kind, positive: bool = False, optional: bool = False) -> None:
        if optional and name not in memory:
            return
        value = memory.get(name)
        if isinstance(value, bool) or not isinstance(value, kind) or value < 0 or (positive and value == 0):
            out.append((name, f"must be a {'positive' if positive else 'non-negative'} number, not {value!r}"))

    number("per_nvcc_thread_peak_mib", int, positive=True)
    number("unlisted_unit_peak_mib", int, positive=True, optional=True)
    number("headroom_mib", int)
    number("headroom_fraction", (int, float))
    number("heavy_unit_mib", int, positive=True, optional=True)
    if "heavy_pool_share" in memory:
        share = memory["heavy_pool_share"]
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            out.append(("heavy_pool_share", f"must be a fraction in (0, 1], not {share!r}"))
    units = memory.get("unit_peaks_mib", {})
    if not isinstance(units, dict):
        out.append(("unit_peaks_mib", "must be an object of \"source\": MiB"))
    else:
        for source, peak in units.items():
            if not re.fullmatch(r"[A-Za-z0-9_./+-]+", source) or source.startswith("/") or ".." in source.split("/"):
                out.append(("unit_peaks_mib", f"{source!r} is not a source path relative to sgl-kernel/"))
            elif "," in source or "=" in source:
                out.append(("unit_peaks_mib", f"{source!r} has a ',' or '=' (the pool list separators)"))
            if isinstance(peak, bool) or not isinstance(peak, int) or peak <= 0:
                out.append(("unit_peaks_mib", f"{source}: {peak!r} is not a positive number of MiB"))
    return out


def rule_from_recipe(recipe: Mapping, job_peak_mib: int | None = None) -> MemoryRule:
    """The recipe's rule; `job_peak_mib` replaces the charge of units without a measured peak."""
    mem = recipe["memory"]
    unlisted = job_peak_mib if job_peak_mib is not None else mem.get("unlisted_unit_peak_mib")
    return MemoryRule(
        per_thread_peak_mib=int(mem["per_nvcc_thread_peak_mib"]),
        unlisted_peak_mib=int(unlisted) if unlisted is not None else None,
        headroom_mib=int(mem["headroom_mib"]),
        headroom_fraction=float(mem["headroom_fraction"]),
        unit_peaks_mib={str(k): int(v) for k, v in mem.get("unit_peaks_mib", {}).items()},
        heavy_unit_mib=int(mem["heavy_unit_mib"]) if mem.get("heavy_unit_mib") is not None else None,
        heavy_pool_share=float(mem.get("heavy_pool_share", 0.5)),
    )


def library_copies(archs: str) -> int:
    """How many common_ops libraries compile every source (patch 0005): one for 9.x targets, one for the rest."""
    return max(1, len({a.split(".")[0] == "9" for a in arch_list(archs)}))


def arch_list(archs: str | Sequence[str]) -> list[str]:
    """The targets of an SGL_KERNEL_CUDA_ARCHS value ("12.0a" or "10.0a;12.0a") or of a list of them."""
    if isinstance(archs, str):
        archs = archs.replace(",", ";").split(";")
    return [a.strip() for a in archs if a.strip()]


def recipe_plan(recipe: Mapping, archs: str, host: Host, *, jobs: int | None = None,
                job_peak_mib: int | None = None, pools: bool = False) -> JobPlan:
    return plan(cores=host.cores, available_mib=host.available_mib, rule=rule_from_recipe(recipe, job_peak_mib),
                archs=max(1, len(arch_list(archs))), jobs=jobs, pools=pools, copies=library_copies(archs))


def version_at_least(version: str | None, minimum: tuple[int, int]) -> bool:
    """Whether a tool's version ("4.4.3", "0.11.1") is at least (major, minor); False when unknown."""
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return m is not None and (int(m.group(1)), int(m.group(2))) >= minimum


def cmake_has_pools(version: str | None) -> bool:
    return version_at_least(version, POOLS_MIN_CMAKE)


def cmake_version(cmake: str) -> str | None:
    try:
        out = subprocess.run([cmake, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"cmake version (\d+\.\d+(?:\.\d+)?)", out)
    return m.group(1) if m else None


# -- Reading the host


def _meminfo(proc_root: str) -> dict[str, int]:
    out = {}
    with open(os.path.join(proc_root, "meminfo")) as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                out[key] = int(parts[0]) // 1024  # kB -> MiB
    return out


def _read_int(path: str) -> int | None:
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def _cgroup_free_mib(proc_root: str, cgroup_root: str) -> tuple[int | None, str]:
    """Limit minus usage of the tightest limited cgroup on the way up (v2 memory.max, v1 limit_in_bytes)."""
    try:
        with open(os.path.join(proc_root, "self", "cgroup")) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None, "no cgroup information"
    best: int | None = None
    where = "no cgroup memory limit"
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":  # cgroup v2
            root, limit_file, usage_file, version = cgroup_root, "memory.max", "memory.current", "v2"
        elif "memory" in controllers.split(","):  # cgroup v1
            root, limit_file, usage_file, version = os.path.join(cgroup_root, "memory"), "memory.limit_in_bytes", "memory.usage_in_bytes", "v1"
        else:
            continue
        group = PurePosixPath("/", path)
        for rel in [group, *group.parents]:  # each parent's limit applies too
            base = os.path.normpath(root + str(rel))
            limit = _read_int(os.path.join(base, limit_file))
            if limit is None or limit >= (1 << 60):  # "max", or v1's "no limit" (a huge number)
                continue
            usage = _read_int(os.path.join(base, usage_file)) or 0
            free = max(0, limit - usage) // (1 << 20)
            if best is None or free < best:
                best, where = free, f"cgroup {version} {base}"
    return best, where


def read_host(proc_root: str = "/proc", cgroup_root: str = "/sys/fs/cgroup", cores: int | None = None,
              memory_gib: float | None = None) -> Host:
    """This host's cores and memory; `memory_gib` is an explicit figure that replaces what the host reports
    (for machines whose MemTotal grows as memory is used, where MemAvailable at the start says too little)."""
    memory_mib = int(memory_gib * 1024) if memory_gib is not None else None
    info = _meminfo(proc_root)
    cgroup_free, where = _cgroup_free_mib(proc_root, cgroup_root)
    if cores is None or cores <= 0:  # NIX_BUILD_CORES=0 means "all of them"
        cores = len(os.sched_getaffinity(0))  # Linux's, as /proc/meminfo is
    mem_available = info.get("MemAvailable", info.get("MemFree", 0))
    source = f"{proc_root}/meminfo MemAvailable; {where}"
    if memory_mib is not None:
        source = f"given: {memory_mib} MiB (the host reports {mem_available} MiB available; {where})"
    return Host(cores, mem_available, cgroup_free, info.get("SwapFree", 0), source, memory_mib)


# -- Script entry point (the Nix derivation)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Plan memory-safe sgl-kernel build jobs, nvcc threads and ninja pools.")
    parser.add_argument("--recipe", required=True, help="pkgs/sgl-kernel/recipe.json")
    parser.add_argument("--cores", type=int, default=None, help="CPU cores to use (0 or absent: all)")
    parser.add_argument("--archs", default=None, help="target list, e.g. 12.0a (default: the recipe's arch)")
    parser.add_argument("--jobs", type=int, default=None, help="at most this many jobs")
    parser.add_argument("--job-peak-mib", type=int, default=None, help="charge of units without a measured peak (MiB)")
    parser.add_argument("--memory-gib", type=float, default=None, help="memory the build may use, instead of the host's report")
    parser.add_argument("--cmake", default=None, help="the cmake that will configure the build: pools only if it is >= 4.2")
    parser.add_argument("--format", choices=("shell", "json"), default="shell")
    args = parser.parse_args(argv)
    try:
        with open(args.recipe) as fh:
            recipe = json.load(fh)
        problems = memory_problems(recipe.get("memory") if isinstance(recipe, dict) else None)
        if problems:
            raise ValueError("; ".join(f"memory.{name}: {what}" for name, what in problems))
        arch = str(args.archs or recipe["arch"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        print(f"jobs.py: cannot read the memory rule from {args.recipe}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    host = read_host(cores=args.cores, memory_gib=args.memory_gib)
    pools = cmake_has_pools(cmake_version(args.cmake)) if args.cmake else False
    try:
        result = recipe_plan(recipe, arch, host, jobs=args.jobs, job_peak_mib=args.job_peak_mib, pools=pools)
    except DoesNotFit as exc:
        print(f"error: {exc.message}\n  hint: {exc.hint}", file=sys.stderr)
        return EXIT_DOES_NOT_FIT
    except ValueError as exc:
        print(f"jobs.py: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        print(json.dumps({"host": asdict(host), "plan": asdict(result), "pools": pools}, indent=2))
    else:
        print(
            f"# sgl-kernel job plan: {result.jobs} job(s) x {result.threads} nvcc thread(s), worst case "
            f"{result.planned_peak_mib} MiB of {host.available_mib} MiB available ({result.note})",
            file=sys.stderr,
        )
        for key, value in result.environment().items():
            print(f"{key}={shlex.quote(value)}")
        flags = " ".join(shlex.quote(f"-D{k}={v}") for k, v in result.defines().items())
        print(f"plannedCmakeFlags=({flags})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
