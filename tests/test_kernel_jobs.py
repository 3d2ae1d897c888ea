"""The memory-safe job planner: never plans more than the memory it is given, heavy units pooled."""

from __future__ import annotations

import csv
import json
import os
import shlex
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blackwell_stack.kernel import jobs
from blackwell_stack.kernel.inputs import recipe


@st.composite
def rules(draw):
    units = draw(st.dictionaries(st.from_regex(r"csrc/[a-z]{1,6}\.cu", fullmatch=True), st.integers(1, 20_000), max_size=12))
    return jobs.MemoryRule(
        per_thread_peak_mib=draw(st.integers(1, 20_000)),
        headroom_mib=draw(st.integers(0, 10_000)),
        headroom_fraction=draw(st.floats(0, 0.5)),
        unit_peaks_mib=units,
        unlisted_peak_mib=draw(st.none() | st.integers(1, 20_000)),
        heavy_unit_mib=draw(st.none() | st.integers(1, 20_000)),
        heavy_pool_share=draw(st.floats(0.05, 1)),
    )


def brute_worst_case(rule: jobs.MemoryRule, plan: jobs.JobPlan, pools: bool, copies: int) -> int:
    """The most memory any `plan.jobs` compiles can hold, found independently of the planner.

    Each listed unit may run `copies` times at once, unlisted units any number
    of times; with a pool, at most `plan.heavy_jobs` of the running compiles are
    pooled units. Every k (number of pooled compiles) is tried.
    """
    scale = min(plan.threads, plan.archs)
    pooled = {s for s, _ in rule.heavy_units()} if pools and plan.heavy_jobs else set()
    heavy = sorted((p * scale for s, p in rule.unit_peaks_mib.items() if s in pooled for _ in range(copies)), reverse=True)
    others = sorted((p * scale for s, p in rule.unit_peaks_mib.items() if s not in pooled for _ in range(copies)), reverse=True)
    unlisted = rule.unlisted_mib * scale
    best = 0
    for k in range(min(plan.heavy_jobs if pooled else 0, len(heavy), plan.jobs) + 1):
        rest = plan.jobs - k
        light = others[:rest] + [unlisted] * rest  # unlisted units never run out
        best = max(best, sum(heavy[:k]) + sum(sorted(light, reverse=True)[:rest]))
    return best


@settings(max_examples=600, deadline=None)
@given(
    cores=st.integers(-1, 128),
    available=st.integers(-1000, 1_000_000),
    rule=rules(),
    archs=st.integers(1, 6),
    jobs_cap=st.none() | st.integers(1, 200),
    pools=st.booleans(),
    copies=st.integers(1, 2),
)
def test_plan_never_exceeds_the_memory_it_is_given(cores, available, rule, archs, jobs_cap, pools, copies):
    reserve = rule.reserve_mib(max(0, available))
    budget = available - reserve
    largest = max([rule.unlisted_mib, *rule.unit_peaks_mib.values()])
    try:
        p = jobs.plan(cores=cores, available_mib=available, rule=rule, archs=archs, jobs=jobs_cap, pools=pools,
                      copies=copies)
    except jobs.DoesNotFit as exc:
        # Refused exactly when the largest compile, alone with one thread, does not fit; the message says so.
        assert budget < largest
        assert str(largest) in exc.message and exc.hint
        return
    assert budget >= largest
    assert p.jobs >= 1 and p.threads >= 1
    assert p.jobs * min(p.threads, archs) <= max(1, cores)  # no more cicc processes than cores
    if jobs_cap is not None:
        assert p.jobs <= jobs_cap
    assert p.threads <= archs
    worst = brute_worst_case(rule, p, pools, copies)
    assert p.planned_peak_mib == worst
    assert worst + reserve <= available  # the property: never more than given
    if p.heavy_jobs:
        assert pools and p.heavy_jobs >= 1  # a pool deeper than the job count does not bind
        assert set(p.heavy_sources) == {s for s, _ in rule.heavy_units()}
        assert all(rule.unit_peaks_mib[s] > rule.heavy_unit_mib for s in p.heavy_sources)
        assert p.defines()["SGL_KERNEL_JOB_POOLS"] == f"{jobs.POOL}={p.heavy_jobs}"
    else:
        assert "SGL_KERNEL_JOB_POOLS" not in p.defines()
    if jobs_cap is None and p.threads == 1 and p.jobs < max(1, cores):
        # ... and as wide as fits: one more job would break the memory.
        wider = jobs.JobPlan(p.jobs + 1, 1, archs, available, reserve, p.per_thread_peak_mib, 0, "", p.heavy_jobs,
                             p.heavy_sources)
        assert brute_worst_case(rule, wider, pools, copies) + reserve > available


def test_single_target_gets_one_thread_per_job():
    rule = jobs.MemoryRule(13944, 2048, 0.1)
    p = jobs.plan(cores=64, available_mib=256 * 1024, rule=rule, archs=1)
    assert (p.jobs, p.threads) == (16, 1)  # 16 x 13944 = 223104 <= 262144 - 26215
    capped = jobs.plan(cores=64, available_mib=256 * 1024, rule=rule, archs=7, jobs=4)
    assert (capped.jobs, capped.threads) == (4, 4)  # threads fill the slots the job cap left


def test_one_job_does_not_fit_on_a_small_host():
    with pytest.raises(jobs.DoesNotFit) as exc:
        jobs.plan(cores=2, available_mib=12 * 1024, rule=jobs.MemoryRule(13944, 2048, 0.1))
    assert "13944 MiB" in exc.value.message and "--job-peak-mib" in exc.value.hint and "--memory-gib" in exc.value.hint


def test_recipe_pools_the_heavy_units_and_runs_the_rest_wide():
    rule = jobs.rule_from_recipe(recipe.load())
    heavy = [s for s, _ in rule.heavy_units()]
    assert heavy[0] == "csrc/gemm/fp8_gemm_kernel.cu" and len(heavy) == 10
    # 64 GiB and 16 cores: one heavy unit at a time, the light ones wide; without the pool only 4 jobs fit.
    pooled = jobs.plan(cores=16, available_mib=64 * 1024, rule=rule, pools=True)
    flat = jobs.plan(cores=16, available_mib=64 * 1024, rule=rule, pools=False)
    assert (pooled.jobs, pooled.heavy_jobs) == (13, 1) and flat.jobs == 4
    # The two-build run of benchmarks/kernel-reproducibility: 200 GiB per build, 16 jobs.
    run = jobs.plan(cores=32, available_mib=200 * 1024, rule=rule, pools=True, jobs=16)
    assert (run.jobs, run.heavy_jobs, run.planned_peak_mib) == (16, 7, 122209)
    assert 2 * run.planned_peak_mib <= 256 * 1024  # both builds' worst cases fit the machine together
    # Both common_ops libraries (9.0a and 12.0a): every unit may compile twice at once.
    both = jobs.plan(cores=32, available_mib=256 * 1024, rule=rule, pools=True, archs=2,
                     copies=jobs.library_copies("9.0a;12.0a"))
    assert both.heavy_jobs >= 1 and both.planned_peak_mib + both.reserve_mib <= 256 * 1024


def test_library_copies_follow_patch_0005():
    assert jobs.library_copies("12.0a") == 1
    assert jobs.library_copies("10.0a;12.0a") == 1
    assert jobs.library_copies("9.0a;12.0a") == 2
    assert jobs.library_copies("9.0a") == 1


def test_recipe_table_covers_every_unit_measured_above_the_unlisted_charge(repo):
    """Every unit of the measured full builds is charged at least its peak."""
    rule = jobs.rule_from_recipe(recipe.load())
    with open(repo / "benchmarks/kernel-compile-memory/full-build-units.tsv") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert len(rows) > 100
    for row in rows:
        peak = int(row["peak_mib_max"])
        charge = rule.unit_peaks_mib.get(row["unit"], rule.unlisted_mib)
        assert charge >= peak, row["unit"]
    assert rule.per_thread_peak_mib == max(int(r["peak_mib_max"]) for r in rows)


@pytest.mark.parametrize("version,pools", [("4.4.3", True), ("4.2.0", True), ("4.1.2", False), ("3.31.6", False), (None, False)])
def test_pools_need_cmake_4_2(version, pools):
    assert jobs.cmake_has_pools(version) is pools


def _proc_tree(tmp_path, meminfo: str, cgroup: str) -> tuple[str, str]:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text(meminfo)
    (proc / "self" / "cgroup").write_text(cgroup)
    return str(proc), str(tmp_path / "cgroup")


def test_cgroup_v2_limit_is_the_tighter_one(tmp_path):
    proc, cg = _proc_tree(
        tmp_path,
        "MemTotal:       65536000 kB\nMemAvailable:   60000000 kB\nSwapFree:        8388608 kB\n",
        "0::/build/job\n",
    )
    job = tmp_path / "cgroup" / "build" / "job"
    job.mkdir(parents=True)
    (job / "memory.max").write_text(str(20 * 1024**3) + "\n")
    (job / "memory.current").write_text(str(4 * 1024**3) + "\n")
    (tmp_path / "cgroup" / "build" / "memory.max").write_text("max\n")
    host = jobs.read_host(proc, cg, cores=8)
    assert host.mem_available_mib == 60000000 // 1024
    assert host.cgroup_free_mib == 16 * 1024
    assert host.available_mib == 16 * 1024
    assert host.swap_free_mib == 8192  # reported, never counted


def test_an_explicit_memory_figure_replaces_the_hosts(tmp_path):
    proc, cg = _proc_tree(tmp_path, "MemTotal: 32000000 kB\nMemAvailable: 31000000 kB\n", "0::/\n")
    host = jobs.read_host(proc, cg, cores=32, memory_gib=200)
    assert host.available_mib == 200 * 1024 and "given: 204800 MiB" in host.source and "30273 MiB" in host.source


def test_no_cgroup_limit_uses_memavailable(tmp_path):
    proc, cg = _proc_tree(tmp_path, "MemTotal: 2048000 kB\nMemAvailable: 1024000 kB\n", "0::/\n")
    (tmp_path / "cgroup").mkdir()
    (tmp_path / "cgroup" / "memory.max").write_text("max\n")
    host = jobs.read_host(proc, cg, cores=0)
    assert host.available_mib == 1000 and host.cgroup_free_mib is None and host.cores >= 1


def test_this_hosts_memory_is_read():
    host = jobs.read_host()
    with open("/proc/meminfo") as fh:
        total_mib = int(fh.read().split("MemTotal:")[1].split()[0]) // 1024
    assert 0 < host.available_mib <= total_mib
    assert host.cores >= 1


def _script(repo, *args, env_extra=None):
    """Run jobs.py the way the Nix derivation does: a bare python3, no blackwell_stack on the path."""
    env = {"PATH": os.environ["PATH"], **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-S", str(repo / "src/blackwell_stack/kernel/jobs.py"), "--recipe", str(repo / "pkgs/sgl-kernel/recipe.json"), *args],
        capture_output=True, text=True, env=env, cwd="/", check=False,
    )


def _shell_values(stdout: str) -> tuple[dict[str, str], list[str]]:
    """What `eval` makes of the script's output: the variables, and the bash array's elements."""
    values, flags = {}, []
    for line in stdout.splitlines():
        name, _, value = line.partition("=")
        if name == "plannedCmakeFlags":
            flags = shlex.split(value[1:-1])
        else:
            values[name] = shlex.split(value)[0]
    return values, flags


@pytest.mark.proc
def test_script_prints_the_plan_for_the_derivation(repo):
    # An explicit memory figure, so that the test does not depend on this host's free memory.
    result = _script(repo, "--cores", "16", "--memory-gib", "64")
    assert result.returncode == 0, result.stderr
    values, flags = _shell_values(result.stdout)
    assert set(values) == {"CMAKE_BUILD_PARALLEL_LEVEL", "MAX_JOBS"}
    assert values["CMAKE_BUILD_PARALLEL_LEVEL"] == values["MAX_JOBS"] == "4"  # no cmake named: no pools
    assert flags == ["-DSGL_KERNEL_COMPILE_THREADS=1"]
    as_json = json.loads(_script(repo, "--format", "json", "--cores", "2", "--memory-gib", "64").stdout)
    assert as_json["plan"]["available_mib"] == 64 * 1024 and as_json["pools"] is False
    assert as_json["plan"]["planned_peak_mib"] + as_json["plan"]["reserve_mib"] <= as_json["plan"]["available_mib"]


@pytest.mark.proc
def test_script_pools_with_a_new_enough_cmake(repo, tmp_path):
    """With the real cmake on PATH: pools when it is 4.2 or newer, none otherwise."""
    import shutil

    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    result = _script(repo, "--cores", "16", "--memory-gib", "64", "--cmake", cmake)
    assert result.returncode == 0, result.stderr
    values, flags = _shell_values(result.stdout)
    if jobs.cmake_has_pools(jobs.cmake_version(cmake)):
        assert values["MAX_JOBS"] == "13" and "-DSGL_KERNEL_JOB_POOLS=sgl_kernel_heavy=1" in flags
        sources = next(f for f in flags if f.startswith("-DSGL_KERNEL_JOB_POOL_SOURCES="))
        assert "csrc/gemm/fp8_gemm_kernel.cu=sgl_kernel_heavy" in sources
    else:
        assert values["MAX_JOBS"] == "4" and flags == ["-DSGL_KERNEL_COMPILE_THREADS=1"]


@pytest.mark.proc
def test_script_refuses_with_exit_6_when_nothing_fits(repo):
    result = _script(repo, "--memory-gib", "8")
    assert result.returncode == 6
    assert "not enough memory to compile sgl-kernel" in result.stderr and "hint:" in result.stderr
    assert result.stdout == ""


@pytest.mark.proc
def test_script_refuses_a_bad_memory_section(repo, tmp_path):
    bad = json.loads((repo / "pkgs/sgl-kernel/recipe.json").read_text())
    bad["memory"]["unit_peaks_mib"]["csrc/x.cu"] = -1
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(bad))
    result = subprocess.run([sys.executable, "-S", str(repo / "src/blackwell_stack/kernel/jobs.py"), "--recipe", str(path)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2 and "memory.unit_peaks_mib: csrc/x.cu: -1" in result.stderr


def test_cgroup_v1_parent_limit_applies(tmp_path):
    proc, cg = _proc_tree(
        tmp_path, "MemTotal: 65536000 kB\nMemAvailable: 60000000 kB\n", "4:memory:/builds/one\n1:cpu:/\n"
    )
    one = tmp_path / "cgroup" / "memory" / "builds" / "one"
    one.mkdir(parents=True)
    (one / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1 "no limit"
    (one / "memory.usage_in_bytes").write_text(str(1024**3) + "\n")
    (one.parent / "memory.limit_in_bytes").write_text(str(32 * 1024**3) + "\n")
    (one.parent / "memory.usage_in_bytes").write_text(str(2 * 1024**3) + "\n")
    host = jobs.read_host(proc, cg, cores=4)
    assert host.cgroup_free_mib == 30 * 1024 and host.available_mib == 30 * 1024
    assert "cgroup v1" in host.source and "builds" in host.source
