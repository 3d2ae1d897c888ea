#!/usr/bin/env python3
"""Peak memory and duration of every compile of a running ninja build (stdlib only, Linux /proc).

    watch_build.py --out peaks.json [--interval 0.5] [--idle-exit 90]

Runs beside one or more builds. Every ninja process on the machine counts:
each child of ninja is one build step (a compile or a link). For each step
it samples the RSS of the step's whole process tree (nvcc, cudafe++, cicc,
ptxas, the host compiler, as measure.py does for one command) and records
the largest sum, when it was first and last seen, and the step's output
(-o) and source (-c), keyed by the ninja's working directory (the build
directory). The JSON is rewritten every few seconds (atomically) and at
exit; the watcher exits once no ninja has run for --idle-exit seconds, or on
SIGTERM.

Used to measure per-unit peaks (pkgs/sgl-kernel/recipe.json
memory.unit_peaks_mib) during the full builds of
benchmarks/kernel-reproducibility/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import sys
import time

PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: str) -> tuple[int, str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    comm = raw[raw.find(b"(") + 1 : raw.rfind(b")")].decode(errors="replace")
    rest = raw[raw.rfind(b")") + 2 :].split()
    return int(rest[1]), comm


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return []


def _step(argv: list[str]) -> tuple[str | None, str | None]:
    """(output, source) of a build step: `sh -c "..."` or a direct command."""
    words = argv
    if len(argv) >= 3 and argv[1] == "-c" and os.path.basename(argv[0]) in ("sh", "bash", "dash"):
        try:
            words = shlex.split(argv[2])
        except ValueError:
            words = argv[2].split()
    out = src = None
    for i, w in enumerate(words[:-1]):
        if w == "-o":
            out = words[i + 1]
        elif w == "-c" and not words[i + 1].startswith("-"):
            src = words[i + 1]
    if out is None:
        m = re.search(r"-o\s+(\S+)", " ".join(words))
        out = m.group(1) if m else " ".join(words)[:200]
    return out, src


def sample(steps: dict, started: float) -> bool:
    """One pass over /proc; updates `steps`; whether any ninja runs."""
    parent: dict[int, int] = {}
    comm: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(name)
            if st:
                parent[int(name)], comm[int(name)] = st
    kids: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        kids.setdefault(ppid, []).append(pid)
    ninjas = [p for p, c in comm.items() if c == "ninja"]
    now = time.monotonic() - started
    for ninja in ninjas:
        try:
            build_dir = os.readlink(f"/proc/{ninja}/cwd")
        except OSError:
            continue
        for child in kids.get(ninja, []):
            tree, todo = [], [child]
            while todo:
                pid = todo.pop()
                tree.append(pid)
                todo.extend(kids.get(pid, ()))
            total = sum(_rss(p) for p in tree)
            key = f"{build_dir}\t{child}"
            entry = steps.get(key)
            if entry is None:
                out, src = _step(_cmdline(child))
                entry = steps[key] = {"build_dir": build_dir, "output": out, "source": src, "first_s": round(now, 1),
                                      "last_s": round(now, 1), "peak_mib": 0, "peak_processes": []}
            entry["last_s"] = round(now, 1)
            if total // (1 << 20) > entry["peak_mib"]:
                entry["peak_mib"] = total // (1 << 20)
                entry["peak_processes"] = sorted(f"{comm.get(p, '?')} {_rss(p) >> 20} MiB" for p in tree)[-6:]
    return bool(ninjas)


def write(path: str, steps: dict, started_wall: float) -> None:
    data = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_wall)),
            "steps": sorted(steps.values(), key=lambda e: (e["build_dir"], e["first_s"]))}
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1)
    os.replace(tmp, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--idle-exit", type=float, default=90)
    args = ap.parse_args()
    steps: dict = {}
    started, started_wall = time.monotonic(), time.time()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    last_seen, last_write = time.monotonic(), 0.0
    while not stop:
        if sample(steps, started):
            last_seen = time.monotonic()
        elif time.monotonic() - last_seen > args.idle_exit:
            break
        if time.monotonic() - last_write > 5:
            write(args.out, steps, started_wall)
            last_write = time.monotonic()
        time.sleep(args.interval)
    write(args.out, steps, started_wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
