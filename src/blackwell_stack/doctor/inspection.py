"""`inspect`: what each ELF in a wheel, a directory or a file needs and carries.

For every ELF: its machine, the libraries it needs (so the CUDA runtime major), the torch libraries and symbols
it needs, and the CUDA architectures of its cubins and PTX (fatbin.py; the tests hold it to cuobjdump). Big
wheels are read member by member in parallel worker processes.

A wheel's RECORD is checked too (wheelrecord.py), every member against its sha256 and size; the workers hash
the ELF members they read anyway. A disagreement is an error of the report.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import multiprocessing
import os
import platform
from dataclasses import asdict, dataclass, field
from email.parser import HeaderParser

from blackwell_stack.errors import StackError
from blackwell_stack.formats import cxxruntime, elf, fatbin, linkage, wheelrecord, wheelzip
from blackwell_stack.progress import Progress

# Below this many bytes of ELF members a worker pool costs more than it saves.
_PARALLEL_THRESHOLD = 64 << 20

HOST_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


@dataclass
class ElfReport:
    name: str
    size: int
    machine: str = ""
    soname: str | None = None
    needed: list[str] = field(default_factory=list)
    cuda_runtime: int | None = None
    torch_libraries: list[str] = field(default_factory=list)
    torch_symbols: list[str] = field(default_factory=list)
    cubin: list[str] = field(default_factory=list)
    ptx: list[str] = field(default_factory=list)
    compression: list[str] = field(default_factory=list)
    fatbin_entries: int = 0
    relocatable: list[str] = field(default_factory=list)  # archs in __nv_relfatbin (device-link inputs only)
    build_id: str | None = None
    cxx_runtime: dict | None = None  # formats/cxxruntime.py's verdict
    sha256: str | None = None  # of the member's bytes (wheel members: for the RECORD check)
    error: str | None = None


def report_from_elf(name: str, size: int, e: elf.ElfFile) -> ElfReport:
    needed = e.needed
    undefined_torch = sorted(
        {s.name for s in e.dynamic_symbols() if not s.defined and not s.weak and linkage.is_torch_symbol(s.name)}
    )
    summary = fatbin.summarize(fatbin.fatbin_entries(e))
    return ElfReport(
        name, size, e.machine_name, e.soname, needed, linkage.cuda_runtime_major(needed),
        linkage.torch_libraries(needed), undefined_torch, summary["cubin"], summary["ptx"], summary["compressed"],
        summary["entries"], fatbin.summarize(fatbin.fatbin_entries(e, fatbin.RELOCATABLE_SECTION))["cubin"],
        e.build_id, cxxruntime.classify(e).to_json(),
    )


def inspect_member(kind: str, root: str, name: str, size: int) -> dict:
    """One member's report as a dict (runs in a worker process; errors come back as data)."""
    try:
        with wheelzip.open_member_elf(kind, root, name) as e:
            rep = report_from_elf(name, size, e)
            if kind == "wheel":
                rep.sha256 = hashlib.sha256(e.data).hexdigest()  # bytes or an mmap
        return asdict(rep)
    except StackError as exc:
        return asdict(ElfReport(name=name, size=size, error=str(exc)))


def inspect_path(path: str, *, jobs: int | None = None, check_record: bool = True) -> dict:
    """The report for a wheel, a directory or a single library, as a JSON-ready dict (check_record: a wheel's)."""
    source = wheelzip.open_source(path)
    members = sorted(source.elf_members, key=lambda m: m.size, reverse=True)
    if not members and source.kind != "wheel":
        raise StackError(
            f"{source.label} holds no ELF file: nothing to inspect",
            "pass a wheel, an installed package directory with compiled libraries (e.g. site-packages/sgl_kernel), or a .so",
        )
    jobs = jobs or min(os.cpu_count() or 1, 4)
    total = sum(m.size for m in members)
    args = [(source.kind, str(source.path), m.name, m.size) for m in members]
    results = []
    with Progress(f"inspecting {len(members)} ELF files", total) as bar:
        if jobs > 1 and len(members) > 1 and total > _PARALLEL_THRESHOLD:
            # spawn, not fork (the progress bar's thread) and not forkserver: the forkserver listens on a socket
            # under $TMPDIR, and a TMPDIR of ~75 characters passes the 107-byte AF_UNIX path limit.
            spawn = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=spawn) as pool:
                futures = [pool.submit(inspect_member, *a) for a in args]
                for future in concurrent.futures.as_completed(futures):
                    results.append(future.result())
                    bar.advance(results[-1]["size"])
        else:
            for a in args:
                results.append(inspect_member(*a))
                bar.advance(results[-1]["size"])
    results.sort(key=lambda r: r["name"])
    report = summarize(source, results)
    if source.kind == "wheel" and check_record:
        _check_record(source, results, report)
    return report


def _check_record(source: wheelzip.WheelSource, results: list[dict], report: dict) -> None:
    """RECORD against the wheel's files; the ELF members' hashes come from the workers that read them."""
    known = {r["name"]: r["sha256"] for r in results if r["sha256"]}
    left = sum(info.file_size for name, info in source.infos.items() if name not in known)
    with Progress("checking RECORD", left) as bar:
        record = wheelrecord.check(source.path, known=known, progress=bar.advance)
    report["record"] = record.to_json()
    report["errors"] += [{"name": "RECORD", "error": problem} for problem in record.problems()]


def summarize(source, results: list[dict]) -> dict:
    ok = [r for r in results if not r["error"]]
    host = HOST_MACHINES.get(platform.machine().lower(), platform.machine().lower())
    notes = []
    foreign = sorted({r["machine"] for r in ok if r["machine"] not in (host, "cuda")})
    if foreign:
        notes.append(f"ELF files for {', '.join(foreign)}: they cannot load on this {host} host")
    runtimes = sorted({r["cuda_runtime"] for r in ok if r["cuda_runtime"]})
    if len(runtimes) > 1:
        notes.append(f"mixed CUDA runtimes {runtimes}: one library was built against another CUDA major")
    return {
        "path": source.label, "kind": source.kind, "distribution": distribution_of(source), "host_machine": host,
        "elf_files": len(results), "cuda_runtime": runtimes,
        "cubin": sorted({a for r in ok for a in r["cubin"]}, key=fatbin.arch_sort_key),
        "ptx": sorted({a for r in ok for a in r["ptx"]}, key=fatbin.arch_sort_key),
        "torch_libraries": sorted({lib for r in ok for lib in r["torch_libraries"]}),
        "torch_symbols": len({s for r in ok for s in r["torch_symbols"]}),
        "errors": [{"name": r["name"], "error": r["error"]} for r in results if r["error"]],
        "problems": cxx_runtime_problems(ok), "notes": notes, "files": results,
    }


def cxx_runtime_problems(reports: list[dict]) -> list[dict]:
    """The libraries whose C++ runtime cannot work: one that carries its own, always; one that refers to the
    runtime without linking it, when it is a torch extension (torch's own libtorch.so leans on libtorch_cpu.so's)."""
    out = []
    for r in reports:
        found = r["cxx_runtime"]
        extension = r["torch_symbols"] and r["name"].rsplit("/", 1)[-1] not in linkage.TORCH_LIBRARIES
        if found["verdict"] == cxxruntime.EMBEDDED or (found["verdict"] == cxxruntime.UNLINKED and extension):
            runtime = cxxruntime.CxxRuntime(found["verdict"], found["runtime_library"], tuple(found["defined"]),
                                            found["defined_count"], found["used_count"])
            out.append({"name": r["name"], "check": "C++ runtime", "message": runtime.message(r["name"]),
                        "fix": cxxruntime.FIX})
    return out


def distribution_of(source) -> dict | None:
    """Name and version from the wheel's METADATA, when there is one."""
    meta_name = next((n for n in source.names if n.endswith(".dist-info/METADATA") and n.count("/") == 1), None)
    if meta_name is None:
        return None
    meta = HeaderParser().parsestr(source.read_text(meta_name) or "")
    fields = {key.lower(): meta[key].strip() for key in ("Name", "Version") if meta[key] is not None}
    return fields or None
