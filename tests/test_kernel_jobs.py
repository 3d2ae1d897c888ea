"""The memory-safe job planner: never plans more than the memory it is given."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blackwell_stack.kernel import jobs

rules = st.builds(
    jobs.MemoryRule,
    per_thread_peak_mib=st.integers(1, 100_000),
    headroom_mib=st.integers(0, 10_000),
    headroom_fraction=st.floats(0, 0.5),
)


@settings(max_examples=500, deadline=None)
@given(
    cores=st.integers(-1, 512),
    available=st.integers(-1000, 4_000_000),
    rule=rules,
    archs=st.integers(1, 12),
    jobs_cap=st.none() | st.integers(1, 1000),
    threads_cap=st.none() | st.integers(1, 64),
)
def test_plan_never_exceeds_the_memory_it_is_given(cores, available, rule, archs, jobs_cap, threads_cap):
    reserve = rule.reserve_mib(max(0, available))
    try:
        p = jobs.plan(cores=cores, available_mib=available, rule=rule, archs=archs, jobs=jobs_cap, threads=threads_cap)
    except jobs.DoesNotFit as exc:
        # Refused exactly when one job with one thread does not fit, with a message that says so.
        assert available - reserve < rule.per_thread_peak_mib
        assert str(rule.per_thread_peak_mib) in exc.message and exc.hint
        return
    assert p.jobs >= 1 and p.threads >= 1
    concurrent = p.jobs * min(p.threads, archs)
    assert p.planned_peak_mib == concurrent * rule.per_thread_peak_mib
    assert p.planned_peak_mib + reserve <= available  # the property: never more than given
    assert concurrent <= max(1, cores)
    if jobs_cap is not None:
        assert p.jobs <= jobs_cap
    if threads_cap is not None:
        assert p.threads <= threads_cap
    if jobs_cap is None:
        # ... and as much as fits: one more concurrent compile would break memory or cores.
        assert (concurrent + 1) * rule.per_thread_peak_mib + reserve > available or concurrent + 1 > max(1, cores)


def test_single_target_gets_one_thread_per_job():
    rule = jobs.MemoryRule(13944, 2048, 0.1)
    p = jobs.plan(cores=64, available_mib=256 * 1024, rule=rule, archs=1)
    assert (p.jobs, p.threads) == (16, 1)  # 16 x 13944 = 223104 <= 262144 - 26215
    capped = jobs.plan(cores=64, available_mib=256 * 1024, rule=rule, archs=7, jobs=4)
    assert (capped.jobs, capped.threads) == (4, 4)  # threads fill the slots the job cap left


def test_one_job_does_not_fit_on_a_small_host():
    with pytest.raises(jobs.DoesNotFit) as exc:
        jobs.plan(cores=2, available_mib=12 * 1024, rule=jobs.MemoryRule(13944, 2048, 0.1))
    assert "13944 MiB" in exc.value.message and "--job-peak-mib" in exc.value.hint


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


def test_script_prints_the_plan_for_the_derivation(repo):
    # A small per-job figure, so that the test does not depend on this host's free memory.
    result = _script(repo, "--cores", "0", "--job-peak-mib", "64")
    assert result.returncode == 0, result.stderr
    values = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert set(values) == {"CMAKE_BUILD_PARALLEL_LEVEL", "MAX_JOBS", "SGL_KERNEL_COMPILE_THREADS"}
    assert values["CMAKE_BUILD_PARALLEL_LEVEL"] == values["MAX_JOBS"] and int(values["MAX_JOBS"]) >= 1
    as_json = json.loads(_script(repo, "--format", "json", "--cores", "2", "--job-peak-mib", "64").stdout)
    assert as_json["plan"]["available_mib"] == min(
        v for v in (as_json["host"]["mem_available_mib"], as_json["host"]["cgroup_free_mib"]) if v is not None
    )
    assert as_json["plan"]["planned_peak_mib"] + as_json["plan"]["reserve_mib"] <= as_json["plan"]["available_mib"]


def test_script_refuses_with_exit_6_when_nothing_fits(repo):
    result = _script(repo, "--job-peak-mib", str(10**9))
    assert result.returncode == 6
    assert "not enough memory to compile sgl-kernel" in result.stderr and "hint:" in result.stderr
    assert result.stdout == ""


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
