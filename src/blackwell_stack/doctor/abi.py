"""`doctor abi`: can this kernel package load into this torch?

The kernel's libraries leave torch's C++ symbols undefined (c10::, at::, torch::, caffe2::); the dynamic loader
must find each in one of torch's libraries or the import fails with "undefined symbol". This compares the two
sets from the dynamic symbol tables, names every missing symbol in C++ (c++filt), shows the torch symbol with
the same name and another signature (the usual cause: built against another torch), and compares the CUDA
runtime majors of both sides.

Known case (docs/reference-deployment.md#kernel-abi): sgl-kernel 0.3.21 from PyPI needs
c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool);
torch 2.10 changed the 4th parameter to unsigned int.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from blackwell_stack.doctor import inspection
from blackwell_stack.download import download
from blackwell_stack.errors import StackError
from blackwell_stack.formats import demangle, linkage, remote_zip, wheelzip
from blackwell_stack.formats.installed import Environment
from blackwell_stack.paths import cache_dir
from blackwell_stack.progress import Progress

REBUILD_FIX = "rebuild sgl-kernel against this torch: `nix build .#sgl-kernel-wheel` or `blackwell-stack kernel build`"

ENV = "env"
_PYPI_SPEC = re.compile(r"^(?:pypi:)?([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+!\-]+)$")

# Which wheel file to read for a PyPI spec: Linux x86_64, CPython 3.12 where the release has it.
PYPI_WHEEL_PATTERNS = (
    "{stem}-{version}-cp312-cp312-manylinux*_x86_64.whl",
    "{stem}-{version}-cp3*-abi3-manylinux*_x86_64.whl",
    "{stem}-{version}-*-manylinux*_x86_64.whl",
)


@dataclass
class Side:
    """One side of the comparison: its ELF files, already parsed into what is needed."""

    label: str
    version: str | None = None
    machines: set[str] = field(default_factory=set)
    needed_libraries: set[str] = field(default_factory=set)
    libraries: list[str] = field(default_factory=list)
    cuda_runtime: int | None = None
    undefined: dict[str, list[str]] = field(default_factory=dict)  # torch symbol -> files that need it
    cxx_runtime_problems: list[dict] = field(default_factory=list)  # inspection.cxx_runtime_problems
    defined: dict[str, str] = field(default_factory=dict)  # symbol -> library that defines it


def _pypi_remote(spec: str) -> tuple[str, remote_zip.RemoteFile] | None:
    """(name, its wheel on PyPI) for a `pypi:NAME==V` spec that is not a path (`env` is none)."""
    m = _PYPI_SPEC.match(spec)
    if not m or Path(spec).exists():
        return None
    name, version = m.groups()
    last: StackError | None = None
    for pattern in PYPI_WHEEL_PATTERNS:
        try:
            return name, remote_zip.pypi_file(name, version, pattern.format(stem=name.replace("-", "_"), version=version))
        except StackError as exc:
            if exc.code != StackError.code:
                raise  # network trouble: no point trying other patterns
            last = exc
    raise StackError(
        f"no Linux x86_64 wheel of {name}=={version} on PyPI",
        f"pass a wheel path instead ({last.message if last else ''})",
    )


def _installed_dir(dist_name: str, package_dir: str, environment: Environment | None = None) -> tuple[Path, str]:
    """Where an installed distribution's package lives: in `environment` (default: this Python's)."""
    environment = environment or Environment()
    dist = environment.get(dist_name)
    if dist is None:
        raise StackError(
            f"{dist_name} is not installed in this Python environment ({environment.python})",
            f"install it, pass --python of the venv that has it, or pass a wheel or directory with "
            f"--{'torch' if dist_name == 'torch' else 'kernel'}",
        )
    path = Path(dist.locate_file(package_dir))
    if not path.is_dir():
        raise StackError(f"{dist_name} {dist.version} is installed but {path} is missing", "reinstall it")
    return path, dist.version


def _add_torch_libraries(side: Side, names: list[str], open_elf) -> None:
    """What each of torch's libraries `names` defines; open_elf(name) is a context manager giving its ElfFile."""
    side.libraries = sorted(n.rsplit("/", 1)[-1] for n in names)
    with Progress(f"reading the symbol tables of {len(names)} torch libraries", len(names), unit="libraries") as bar:
        for name in names:
            with open_elf(name) as e:
                side.machines.add(e.machine_name)
                rt = linkage.cuda_runtime_major(e.needed)
                if rt and (side.cuda_runtime is None or name.endswith(linkage.TORCH_CUDA_LIBRARIES)):
                    side.cuda_runtime = rt
                for s in e.dynamic_symbols():
                    if s.defined:
                        side.defined.setdefault(s.name, name.rsplit("/", 1)[-1])
            bar.advance()


def load_kernel(spec: str, environment=None) -> Side:
    """The kernel side: a wheel, a directory, a .so, `env` (installed sgl-kernel) or `pypi:sgl-kernel==V`."""
    pypi = _pypi_remote(spec)
    if pypi is not None:
        dist_name, remote = pypi
        dest = cache_dir("pypi", dist_name.lower(), remote.filename.split("-")[1]) / remote.filename
        if not (dest.is_file() and dest.stat().st_size == remote.size):  # the whole kernel wheel: every library matters
            download(remote.url, dest, expected_sha256=remote.sha256, expected_size=remote.size)
        spec = str(dest)
    version = None
    if spec == ENV:
        path, version = _installed_dir("sgl-kernel", "sgl_kernel", environment)
        spec = str(path)
    # The same per-library reports as `inspect`, read in parallel.
    report = inspection.inspect_path(spec, check_record=False)
    side = Side(label=report["path"], version=version or (report["distribution"] or {}).get("version"))
    if report["errors"]:
        raise StackError("cannot read {name}: {error}".format(**report["errors"][0]))
    files = report["files"]  # none with an error (no RECORD check here)
    if not files:
        raise StackError(f"{report['path']} holds no ELF libraries", "pass the kernel package (wheel or directory)")
    side.cxx_runtime_problems = inspection.cxx_runtime_problems(files)
    for f in files:
        side.machines.add(f["machine"])
        side.needed_libraries.update(f["needed"])
        if f["cuda_runtime"] and side.cuda_runtime is None:
            side.cuda_runtime = f["cuda_runtime"]
        for s in f["torch_symbols"]:
            side.undefined.setdefault(s, []).append(f["name"])
    return side


def load_torch(spec: str, kernel: Side, environment=None) -> Side:
    """The torch side: a wheel, a torch/lib directory, `env`, or `pypi:torch==V` (range-read, cached)."""
    pypi = _pypi_remote(spec)
    if pypi is not None:
        return _load_remote_torch(pypi[1], kernel)
    version, where = None, Path(spec)
    if spec == ENV:
        where, version = _installed_dir("torch", "torch/lib", environment)
    elif (where / "torch" / "lib").is_dir():  # a site-packages
        where = where / "torch" / "lib"
    elif (where / "lib").is_dir() and (where / "__init__.py").is_file():  # the torch package directory
        where = where / "lib"
    source = wheelzip.open_source(where)
    if source.kind == "wheel":
        version = (inspection.distribution_of(source) or {}).get("version")
    side = Side(label=source.label, version=version)
    names = [m.name for m in source.elf_members if m.name.rsplit("/", 1)[-1] in linkage.TORCH_LIBRARIES]
    if not names:
        raise StackError(
            f"{source.label} holds none of torch's libraries ({', '.join(linkage.TORCH_LIBRARIES[:3])}, ...)",
            "pass a torch wheel, its torch/lib directory, or `env` for the installed torch",
        )
    _add_torch_libraries(side, names, source.open_elf)
    return side


def _load_remote_torch(remote: remote_zip.RemoteFile, kernel: Side) -> Side:
    side = Side(label=remote.filename, version=remote.filename.split("-")[1])
    with remote_zip.RemoteWheel(remote) as wheel:
        wanted = (kernel.needed_libraries & set(linkage.TORCH_LIBRARIES)) | {"libc10.so", "libc10_cuda.so",
                                                                              "libtorch_python.so"}
        names = sorted(n for n in wheel.names if n.startswith("torch/lib/") and n.rsplit("/", 1)[-1] in wanted)
        if not names:
            raise StackError(f"{remote.filename} has no torch/lib libraries", "is this a torch wheel?")
        paths = {name: wheel.fetch_member(name) for name in names}  # each fetch shows its own download progress
        _add_torch_libraries(side, names, lambda name: wheelzip.open_member_elf("file", paths[name], name))
    return side


_NESTED = re.compile(r"^_Z(?:T[VIST])?(N[KVrRO]*)?")
_DIGITS = re.compile(r"\d+")


def name_prefix(symbol: str) -> str | None:
    """The mangled qualified name without the parameter types, to find the same function with another signature."""
    m = _NESTED.match(symbol)
    if not m:
        return None
    i = m.end()
    nested = m.group(1) is not None
    while length := _DIGITS.match(symbol, i):  # <length><name>, once (or per level of a nested name)
        i = length.end() + int(length.group())
        if not nested:
            break
    if nested and symbol[i : i + 1] in ("C", "D") and symbol[i + 1 : i + 2].isdigit():
        i += 2  # constructor C1/C2 or destructor D0/D1/D2 of the class just named
    if nested:
        if i >= len(symbol) or symbol[i] != "E":
            return None
        i += 1
    return symbol[:i] if i > m.end() else None


def signature_difference(wanted: str, present: str) -> str | None:
    """`parameter 4: int -> unsigned int` for two demangled signatures of one function."""
    a, b = demangle.parameters(wanted), demangle.parameters(present)
    if len(a) != len(b):
        return f"{len(a)} parameters wanted, torch's has {len(b)}"
    diffs = [f"parameter {i + 1}: {x} -> {y}" for i, (x, y) in enumerate(zip(a, b)) if x != y]
    return "; ".join(diffs) or None


def _problem(check: str, message: str, fix: str) -> dict:
    return {"check": check, "message": message, "fix": fix}


def compare(kernel: Side, torch: Side) -> dict:
    problems: list[dict] = []
    if not kernel.undefined:
        # Nothing to resolve is not a match: the file is not a torch extension, so this check says nothing of it.
        problems.append(_problem(
            "not a torch extension",
            f"{kernel.label} needs no torch symbol (c10::, at::, torch::): it is not a torch extension, so whether "
            "it loads into this torch cannot be told from it",
            "pass the kernel package itself: its wheel, its installed directory (site-packages/sgl_kernel) or `env`"))
    if kernel.machines and torch.machines and kernel.machines != torch.machines:
        problems.append(_problem(
            "machine", f"the kernel is built for {', '.join(sorted(kernel.machines))} but torch's libraries are "
            f"{', '.join(sorted(torch.machines))}; they cannot load into one process",
            "use the kernel and torch wheels for the same machine (x86_64 on the target)"))
    needs_cuda = bool(kernel.needed_libraries & set(linkage.TORCH_CUDA_LIBRARIES))
    torch_has_cuda = bool(set(torch.libraries) & set(linkage.TORCH_CUDA_LIBRARIES))
    if needs_cuda and not torch_has_cuda:
        problems.append(_problem(
            "torch CUDA libraries", f"{torch.label} has no CUDA libraries (libc10_cuda.so, libtorch_cuda.so): it is "
            "a CPU-only torch, but the kernel links them",
            "install the CUDA 13 torch the stack pins (2.12.0.dev20260307+cu130), not a CPU build"))
    if kernel.cuda_runtime and torch.cuda_runtime and kernel.cuda_runtime != torch.cuda_runtime:
        problems.append(_problem(
            "CUDA runtime", f"the kernel links the CUDA {kernel.cuda_runtime} runtime "
            f"(libcudart.so.{kernel.cuda_runtime}), torch links CUDA {torch.cuda_runtime}",
            REBUILD_FIX + f" (with CUDA {torch.cuda_runtime})"))
    missing_names = sorted(s for s in kernel.undefined if s not in torch.defined)
    missing = _explain_missing(missing_names, kernel, torch) if not problems or torch_has_cuda else []
    if missing:
        problems.append(_problem(
            "torch symbols", f"{len(missing)} of the {len(kernel.undefined)} torch symbols the kernel needs are not "
            f"defined by torch {torch.version or ''}".replace("  ", " ").strip()
            + ": the kernel was built against another torch", REBUILD_FIX))
    # Symbols that resolve are not enough: a library with its own C++ runtime crashes torch's process.
    problems += [_problem("C++ runtime", p["message"], p["fix"]) for p in kernel.cxx_runtime_problems]
    return {
        "kernel": {"label": kernel.label, "version": kernel.version, "machine": sorted(kernel.machines),
                   "cuda_runtime": kernel.cuda_runtime, "torch_symbols_needed": len(kernel.undefined)},
        "torch": {"label": torch.label, "version": torch.version, "machine": sorted(torch.machines),
                  "cuda_runtime": torch.cuda_runtime, "libraries": torch.libraries},
        "resolved": len(kernel.undefined) - len(missing_names), "missing": missing, "problems": problems,
        "ok": not problems,
    }


def _explain_missing(missing: list[str], kernel: Side, torch: Side) -> list[dict]:
    prefixes = {s: name_prefix(s) for s in missing}
    wanted_prefixes = {p for p in prefixes.values() if p}
    candidates: dict[str, list[str]] = {}
    if wanted_prefixes:
        for sym in torch.defined:
            p = name_prefix(sym)
            if p in wanted_prefixes:
                candidates.setdefault(p, []).append(sym)
    readable = demangle.demangle(missing + [c for cs in candidates.values() for c in cs])
    return [{"symbol": s, "demangled": readable.get(s, s), "needed_by": sorted(set(kernel.undefined[s])),
             "torch_has": [{"symbol": c, "demangled": readable.get(c, c), "library": torch.defined[c],
                            "difference": signature_difference(readable.get(s, s), readable.get(c, c))}
                           for c in sorted(candidates.get(prefixes[s] or "", []))]}
            for s in missing]
