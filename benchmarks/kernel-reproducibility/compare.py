#!/usr/bin/env python3
"""Compare the two builds of device.sh: wheels, members, build-tree objects, architectures, per-unit peaks.

    compare.py --work /tmp/sgl-repro --results DIR --build-dirs build b/uild-dir-with-a-longer-name

Writes into DIR: wheel-diff.json (`blackwell-stack wheel diff --json`),
members.tsv (every member's size and sha256 in both wheels), objects.tsv
(every .o/.a/.so of the two build trees that differs), inspect.json
(`blackwell-stack inspect --json` of wheel a: the architectures of every
ELF), needed.tsv (DT_NEEDED of every ELF in the wheel), sections.txt (for an
ELF member that differs: which sections, where, and the strings around the
first differences), build-info.json (the wheel's sgl_kernel/_build_info.json),
unit-peaks.tsv (the per-unit peaks and durations watch_build.py saw) and
summary.txt, which it also prints. Needs blackwell_stack on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

from blackwell_stack.formats import elf


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "blackwell_stack", *args], capture_output=True, text=True, check=False)


def section_report(name: str, a: bytes, b: bytes) -> list[str]:
    ea, eb = elf.parse(a, f"a/{name}"), elf.parse(b, f"b/{name}")
    out = [f"== {name}: {len(a)} vs {len(b)} bytes; build-id {ea.build_id} vs {eb.build_id}"]
    secs_b = {s.name: s for s in eb.sections}
    for s in ea.sections:
        t = secs_b.get(s.name)
        if t is None:
            out.append(f"  {s.name}: only in a")
            continue
        ba, bb = bytes(ea.section_bytes(s)), bytes(eb.section_bytes(t))
        if ba == bb:
            continue
        diffs = [i for i in range(min(len(ba), len(bb))) if ba[i] != bb[i]]
        out.append(f"  {s.name}: size {len(ba)} vs {len(bb)}, {len(diffs)} differing bytes, first at "
                   f"{diffs[:8]}")
        for i in diffs[:3]:
            lo = max(0, i - 48)
            out.append(f"    a@{i}: {ba[lo:i + 48]!r}")
            out.append(f"    b@{i}: {bb[lo:i + 48]!r}")
    for name_b in secs_b.keys() - {s.name for s in ea.sections}:
        out.append(f"  {name_b}: only in b")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--build-dirs", nargs=2, required=True)
    args = ap.parse_args()
    work, results = Path(args.work), Path(args.results)
    summary: list[str] = []
    wheels = [sorted((work / x / "out").glob("sgl_kernel-*.whl")) for x in ("a", "b")]
    if not all(wheels):
        summary.append(f"missing wheel(s): a={wheels[0]} b={wheels[1]}")
        (results / "summary.txt").write_text("\n".join(summary) + "\n")
        print("\n".join(summary))
        return 1
    wa, wb = wheels[0][-1], wheels[1][-1]
    summary.append(f"wheel a: {wa.name} {wa.stat().st_size} bytes sha256 {sha256(wa.read_bytes())}")
    summary.append(f"wheel b: {wb.name} {wb.stat().st_size} bytes sha256 {sha256(wb.read_bytes())}")
    diff = cli("wheel", "diff", str(wa), str(wb), "--json")
    (results / "wheel-diff.json").write_text(diff.stdout + diff.stderr)
    table = cli("wheel", "diff", str(wa), str(wb))
    summary.append(f"wheel diff (exit {table.returncode}):\n" + (table.stdout + table.stderr).strip())

    with zipfile.ZipFile(wa) as za, zipfile.ZipFile(wb) as zb:
        names = sorted(set(za.namelist()) | set(zb.namelist()))
        rows, differing = ["member\tsize_a\tsize_b\tsha256_a\tsha256_b\tsame"], []
        for n in names:
            da = za.read(n) if n in za.namelist() else None
            db = zb.read(n) if n in zb.namelist() else None
            same = da == db
            rows.append("\t".join([n, str(len(da) if da is not None else "-"), str(len(db) if db is not None else "-"),
                                   sha256(da) if da is not None else "-", sha256(db) if db is not None else "-",
                                   "yes" if same else "NO"]))
            if not same:
                differing.append(n)
        (results / "members.tsv").write_text("\n".join(rows) + "\n")
        summary.append(f"members: {len(names)}, differing: {len(differing)} {differing[:10]}")
        needed, reports = ["member\tDT_NEEDED\tRUNPATH"], []
        for n in names:
            if n in za.namelist():
                data = za.read(n)
                if elf.is_elf(data[:4]):
                    e = elf.parse(data, n)
                    needed.append(f"{n}\t{' '.join(e.needed)}\t{':'.join(e.runpath)}")
        (results / "needed.tsv").write_text("\n".join(needed) + "\n")
        for n in differing:
            if n in za.namelist() and n in zb.namelist():
                da, db = za.read(n), zb.read(n)
                if elf.is_elf(da[:4]) and elf.is_elf(db[:4]):
                    reports += section_report(n, da, db)
        (results / "sections.txt").write_text("\n".join(reports) + "\n")
        if reports:
            summary.append("differing ELF sections:\n" + "\n".join(reports[:40]))
        if "sgl_kernel/_build_info.json" in za.namelist():
            (results / "build-info.json").write_bytes(za.read("sgl_kernel/_build_info.json"))
            info = json.loads(za.read("sgl_kernel/_build_info.json"))
            summary.append(f"build record: torch {info['torch']}")
        layout = sorted({n.split("/")[0] for n in names})
        summary.append(f"top-level entries: {layout}")

    objs = ["path\tsize_a\tsize_b"]
    ra, rb = work / "a" / args.build_dirs[0], work / "b" / args.build_dirs[1]
    count = 0
    for fa in sorted(ra.rglob("*")):
        if fa.suffix not in (".o", ".a", ".so") or not fa.is_file():
            continue
        count += 1
        fb = rb / fa.relative_to(ra)
        if not fb.is_file():
            objs.append(f"{fa.relative_to(ra)}\t{fa.stat().st_size}\tmissing")
        elif fa.read_bytes() != fb.read_bytes():
            objs.append(f"{fa.relative_to(ra)}\t{fa.stat().st_size}\t{fb.stat().st_size}")
    (results / "objects.tsv").write_text("\n".join(objs) + "\n")
    summary.append(f"build-tree objects compared: {count}, differing: {len(objs) - 1}")

    insp = cli("inspect", str(wa), "--json")
    (results / "inspect.json").write_text(insp.stdout + insp.stderr)
    insp_table = cli("inspect", str(wa))
    summary.append(f"inspect wheel a (exit {insp_table.returncode}):\n" + (insp_table.stdout + insp_table.stderr).strip()[-3000:])

    peaks_file = work / "peaks.json"
    if peaks_file.is_file():
        steps = json.loads(peaks_file.read_text())["steps"]
        lines = ["build_dir\tsource\toutput\tpeak_mib\tseconds\tfirst_s"]
        for s in sorted(steps, key=lambda s: -s["peak_mib"]):
            lines.append(f"{s['build_dir']}\t{s['source']}\t{s['output']}\t{s['peak_mib']}\t"
                         f"{round(s['last_s'] - s['first_s'], 1)}\t{s['first_s']}")
        (results / "unit-peaks.tsv").write_text("\n".join(lines) + "\n")
        summary.append("largest steps:\n" + "\n".join(lines[1:13]))
    text = "\n".join(summary) + "\n"
    (results / "summary.txt").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
