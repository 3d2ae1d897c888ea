#!/usr/bin/env python3
"""Peak memory of a command's whole process tree (stdlib only, Linux /proc).

    measure.py --label NAME --out result.json -- COMMAND ARGS...

nvcc is a driver: the memory that kills a build is held by its children
(cudafe++, cicc, ptxas, the host compiler), several at once with --threads.
`/usr/bin/time -v` reports only the largest single process, so this samples
the RSS of every descendant every 50 ms and records the largest SUM (what the
build host must have free) as well as the largest single process and the
kernel's own maximum for the children (getrusage), as a cross-check.

Used to measure the per-job figure in pkgs/sgl-kernel/recipe.json; the
results and the exact commands are in results.json beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

PAGE = os.sysconf("SC_PAGE_SIZE")


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: split after the last ')'.
        rest = stat[stat.rfind(b")") + 2 :].split()
        kids.setdefault(int(rest[1]), []).append(int(name))
    return kids


def _tree(root: int) -> list[int]:
    kids = _children_map()
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, ()))
    return out


def _rss_and_name(pid: int) -> tuple[int, str]:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            rss = int(fh.read().split()[1]) * PAGE
        with open(f"/proc/{pid}/comm") as fh:
            name = fh.read().strip()
    except (OSError, IndexError, ValueError):
        return 0, ""
    return rss, name


def measure(argv: list[str], interval: float = 0.05) -> dict:
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peak_sum, peak_single, peak_procs = 0, 0, []
    output = bytearray()
    os.set_blocking(proc.stdout.fileno(), False)
    while True:
        chunk = proc.stdout.read()
        if chunk:
            output += chunk
        samples = [(pid, *_rss_and_name(pid)) for pid in _tree(proc.pid)]
        total = sum(s[1] for s in samples)
        if total > peak_sum:
            peak_sum = total
            peak_procs = sorted(((name, rss // (1 << 20)) for _, rss, name in samples if rss), key=lambda x: -x[1])
        peak_single = max([peak_single] + [s[1] for s in samples])
        if proc.poll() is not None:
            break
        time.sleep(interval)
    rest = proc.stdout.read()
    if rest:
        output += rest
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "command": argv,
        "exit_code": proc.returncode,
        "wall_seconds": round(time.monotonic() - started, 1),
        "peak_tree_rss_mib": round(peak_sum / (1 << 20)),
        "peak_single_process_rss_mib": round(peak_single / (1 << 20)),
        "processes_at_peak": [f"{n} {m} MiB" for n, m in peak_procs],
        "rusage_children_maxrss_mib": round(usage.ru_maxrss / 1024),
        "sample_interval_s": interval,
        "output_tail": output.decode(errors="replace")[-3000:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    argv = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not argv:
        parser.error("give the command to measure after --")
    result = {"label": args.label, **measure(argv)}
    tmp = args.out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(result, fh, indent=2)
    os.replace(tmp, args.out)
    print(f"{args.label}: exit {result['exit_code']}, peak tree RSS {result['peak_tree_rss_mib']} MiB, "
          f"largest process {result['peak_single_process_rss_mib']} MiB, {result['wall_seconds']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
