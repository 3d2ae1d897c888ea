"""Memory-safe build parallelism for sgl-kernel: how many jobs x nvcc threads fit.

The ONE implementation of the rule, used by `blackwell-stack kernel build` (as
a module) and by the Nix derivation at build time (as a script: only the
builder knows its memory). Standard library only, no blackwell_stack imports,
so the derivation can run it with a bare python3:

    python3 src/blackwell_stack/kernel/jobs.py --recipe pkgs/sgl-kernel/recipe.json \
        --cores "$NIX_BUILD_CORES" --format shell

prints `NAME=VALUE` lines (CMAKE_BUILD_PARALLEL_LEVEL, MAX_JOBS,
SGL_KERNEL_COMPILE_THREADS) to eval, and exits 6 with the reason on stderr
when not even one job with one thread fits.

The rule (recipe.json memory.rule): a job running nvcc with T threads over A
target architectures holds up to min(T, A) cicc processes at once (nvcc's
--threads parallelises over -gencode targets only), each charged the measured
per-thread peak. jobs x min(T, A) x peak must fit in the available memory
(min of MemAvailable and the cgroup's limit minus usage) less a reserve of
max(headroom_mib, headroom_fraction x available). Swap is not counted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import asdict, dataclass

EXIT_DOES_NOT_FIT = 6  # blackwell_stack.errors.ExitCode.TOOLCHAIN: the host is wrong for the job
EXIT_USAGE = 2


class DoesNotFit(Exception):
    """Not even one job with one nvcc thread fits in the memory given."""

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

    @property
    def available_mib(self) -> int:
        if self.cgroup_free_mib is None:
            return self.mem_available_mib
        return min(self.mem_available_mib, self.cgroup_free_mib)


@dataclass(frozen=True)
class MemoryRule:
    per_thread_peak_mib: int
    headroom_mib: int
    headroom_fraction: float

    def reserve_mib(self, available_mib: int) -> int:
        return max(self.headroom_mib, math.ceil(available_mib * self.headroom_fraction))


@dataclass(frozen=True)
class JobPlan:
    jobs: int
    threads: int
    archs: int
    available_mib: int
    reserve_mib: int
    per_thread_peak_mib: int
    planned_peak_mib: int  # jobs x min(threads, archs) x per-thread peak
    note: str

    @property
    def concurrent_compiles(self) -> int:
        return self.jobs * min(self.threads, self.archs)

    def environment(self) -> dict[str, str]:
        return {"CMAKE_BUILD_PARALLEL_LEVEL": str(self.jobs), "MAX_JOBS": str(self.jobs)}

    def defines(self) -> dict[str, str]:
        return {"SGL_KERNEL_COMPILE_THREADS": str(self.threads)}


def plan(
    *,
    cores: int,
    available_mib: int,
    rule: MemoryRule,
    archs: int = 1,
    jobs: int | None = None,
    threads: int | None = None,
) -> JobPlan:
    """The largest plan that fits; `jobs`/`threads` cap it (never raise it past the memory)."""
    if rule.per_thread_peak_mib <= 0:
        raise ValueError("per-thread peak must be positive")
    cores = max(1, cores)
    archs = max(1, archs)
    reserve = rule.reserve_mib(max(0, available_mib))
    budget = available_mib - reserve
    if budget < rule.per_thread_peak_mib:
        raise DoesNotFit(
            f"not enough memory to compile sgl-kernel: one job with one nvcc thread needs "
            f"{rule.per_thread_peak_mib} MiB, and {max(budget, 0)} MiB are usable "
            f"({available_mib} MiB available less a reserve of {reserve} MiB)",
            "free memory (stop other programs), build on a host with more memory, or raise the "
            "cgroup/container memory limit; if your own measurement of the per-job peak is lower, "
            "pass it with --job-peak-mib (recipe.json memory.per_nvcc_thread_peak_mib)",
        )
    # Concurrent cicc processes the memory and the cores allow.
    slots = max(1, min(cores, budget // rule.per_thread_peak_mib))
    notes = []
    n_jobs = slots
    if jobs is not None:
        if jobs < 1:
            raise ValueError("jobs must be at least 1")
        if jobs > slots:
            notes.append(f"--jobs {jobs} lowered to {slots}: more would not fit in memory or cores")
        n_jobs = min(jobs, slots)
    # Threads only help over several targets, and only where the jobs left slots free.
    fit_threads = max(1, min(archs, slots // n_jobs))
    if threads is not None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        if threads > fit_threads:
            notes.append(f"nvcc threads {threads} lowered to {fit_threads}: more would not fit or not help")
    n_threads = min(threads, fit_threads) if threads is not None else fit_threads
    limited_by = "memory" if budget // rule.per_thread_peak_mib < cores else "cores"
    notes.insert(0, f"{slots} concurrent nvcc compile(s) fit, limited by {limited_by}")
    peak = n_jobs * min(n_threads, archs) * rule.per_thread_peak_mib
    return JobPlan(n_jobs, n_threads, archs, available_mib, reserve, rule.per_thread_peak_mib, peak, "; ".join(notes))


# ---------------------------------------------------------------------------
# Reading the host


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
    if not text.isdigit():  # "max" (no limit)
        return None
    return int(text)


def _walk_up(rel: str):
    """"a/b/c" -> "a/b/c", "a/b", "a", "" (a cgroup and every parent; each parent's limit applies too)."""
    rel = rel.strip("/")
    while True:
        yield rel
        if not rel:
            return
        rel = os.path.dirname(rel)


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
        for rel in _walk_up(path):
            base = os.path.join(root, rel) if rel else root
            limit = _read_int(os.path.join(base, limit_file))
            if limit is None or limit >= (1 << 60):  # "max", or v1's "no limit" (a huge number)
                continue
            usage = _read_int(os.path.join(base, usage_file)) or 0
            free = max(0, limit - usage) // (1 << 20)
            if best is None or free < best:
                best, where = free, f"cgroup {version} {base}"
    return best, where


def read_host(proc_root: str = "/proc", cgroup_root: str = "/sys/fs/cgroup", cores: int | None = None) -> Host:
    info = _meminfo(proc_root)
    cgroup_free, where = _cgroup_free_mib(proc_root, cgroup_root)
    if cores is None or cores <= 0:  # NIX_BUILD_CORES=0 means "all of them"
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:
            cores = os.cpu_count() or 1
    mem_available = info.get("MemAvailable", info.get("MemFree", 0))
    return Host(
        cores=cores,
        mem_available_mib=mem_available,
        cgroup_free_mib=cgroup_free,
        swap_free_mib=info.get("SwapFree", 0),
        source=f"{proc_root}/meminfo MemAvailable; {where}",
    )


def rule_from_recipe(recipe: dict, job_peak_mib: int | None = None) -> MemoryRule:
    mem = recipe["memory"]
    return MemoryRule(
        per_thread_peak_mib=int(job_peak_mib if job_peak_mib is not None else mem["per_nvcc_thread_peak_mib"]),
        headroom_mib=int(mem["headroom_mib"]),
        headroom_fraction=float(mem["headroom_fraction"]),
    )


def arch_count(arch_list: str) -> int:
    """Number of targets in an SGL_KERNEL_CUDA_ARCHS value ("12.0a" or "10.0a;12.0a")."""
    return max(1, len([a for a in arch_list.replace(",", ";").split(";") if a.strip()]))


# ---------------------------------------------------------------------------
# Script entry point (the Nix derivation)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Plan memory-safe sgl-kernel build jobs x nvcc threads.")
    parser.add_argument("--recipe", required=True, help="pkgs/sgl-kernel/recipe.json")
    parser.add_argument("--cores", type=int, default=None, help="CPU cores to use (0 or absent: all)")
    parser.add_argument("--archs", default=None, help="target list, e.g. 12.0a (default: the recipe's arch)")
    parser.add_argument("--jobs", type=int, default=None, help="at most this many jobs")
    parser.add_argument("--job-peak-mib", type=int, default=None, help="override the measured per-thread peak")
    parser.add_argument("--format", choices=("shell", "json"), default="shell")
    args = parser.parse_args(argv)
    try:
        with open(args.recipe) as fh:
            recipe = json.load(fh)
        rule = rule_from_recipe(recipe, args.job_peak_mib)
        archs = arch_count(args.archs or recipe["arch"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"jobs.py: cannot read the memory rule from {args.recipe}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    host = read_host(cores=args.cores)
    try:
        result = plan(cores=host.cores, available_mib=host.available_mib, rule=rule, archs=archs, jobs=args.jobs)
    except DoesNotFit as exc:
        print(f"error: {exc.message}\n  hint: {exc.hint}", file=sys.stderr)
        return EXIT_DOES_NOT_FIT
    except ValueError as exc:
        print(f"jobs.py: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        print(json.dumps({"host": asdict(host), "plan": asdict(result)}, indent=2))
    else:
        print(
            f"# sgl-kernel job plan: {result.jobs} job(s) x {result.threads} nvcc thread(s), planned peak "
            f"{result.planned_peak_mib} MiB of {host.available_mib} MiB available ({result.note})",
            file=sys.stderr,
        )
        for key, value in {**result.environment(), **result.defines()}.items():
            print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
