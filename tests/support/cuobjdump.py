"""NVIDIA's cuobjdump, when it is installed: the reference the tests hold `inspect`'s fatbin reader to.

Found on PATH, in the PyPI package `nvidia-cuda-cuobjdump` (nvidia/cu13/bin)
or under CUDA_HOME. `--list-elf --list-ptx` names each entry
`<file>.<n>.sm_120a.cubin` / `.ptx`; the architecture is read from that name.
cuobjdump's listing drops the family suffix ("sm_100f" is listed as
"sm_100"); compare family entries without it.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.errors import StackError
from blackwell_stack.formats.fatbin import arch_sort_key

_ENTRY = re.compile(r"^(ELF|PTX) file\s+\d+:\s+(\S+)$")
_ARCH = re.compile(r"\.(sm_\d+[a-z]?)\.(?:cubin|ptx)$")


@dataclass(frozen=True)
class Listing:
    cubin: list[str]
    ptx: list[str]


def find() -> str | None:
    """Path of a cuobjdump binary, or None."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        files = importlib.metadata.files("nvidia-cuda-cuobjdump") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if f.name == "cuobjdump":
            path = Path(f.locate())
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and Path(home, "bin", "cuobjdump").is_file():
            return str(Path(home, "bin", "cuobjdump"))
    return None


def required() -> str:
    """cuobjdump's path, or the test is skipped."""
    import pytest

    found = find()
    if found is None:
        pytest.skip("cuobjdump is not installed: pip install nvidia-cuda-cuobjdump (a test dependency)")
    return found


def version(binary: str) -> str | None:
    try:
        out = proc.run([binary, "--version"], check=False, timeout=30).stdout
    except StackError:
        return None
    m = re.search(r"release ([\d.]+)", out)
    return m.group(1) if m else None


class CuobjdumpError(Exception):
    pass


def list_entries(binary: str, path: str | Path, timeout: float = 600) -> Listing:
    """Architectures of the cubins and PTX in path, as cuobjdump lists them (in file order, with repeats)."""
    try:
        result = proc.run([binary, "--list-elf", "--list-ptx", str(path)], check=False, timeout=timeout)
    except StackError as exc:
        raise CuobjdumpError(f"{binary} failed on {path}: {exc.message}") from None
    if "does not contain device code" in result.stderr + result.stdout:
        return Listing([], [])
    if result.returncode != 0:
        raise CuobjdumpError(f"cuobjdump exited {result.returncode} on {path}: {result.stderr.strip()[-300:]}")
    cubin: list[str] = []
    ptx: list[str] = []
    for line in result.stdout.splitlines():
        m = _ENTRY.match(line.strip())
        if not m:
            continue
        a = _ARCH.search(m.group(2))
        arch = a.group(1) if a else "unknown"
        (cubin if m.group(1) == "ELF" else ptx).append(arch)
    return Listing(cubin, ptx)


def listing_name(arch: str) -> str:
    """How cuobjdump's listing spells arch ("sm_100f" -> "sm_100")."""
    return arch[:-1] if arch.endswith("f") else arch


def disagreements(binary: str, report: dict, path: str | Path, tmp: Path) -> tuple[int, list[str]]:
    """(files compared, names of those whose cubin and PTX lists differ from cuobjdump's) for an `inspect` report
    of `path`; wheel members are unpacked under `tmp` one at a time for cuobjdump, which reads files."""
    path, compared, differ = Path(path), 0, []
    for f in report["files"]:
        if f["error"] or not f["fatbin_entries"]:
            continue
        if report["kind"] == "wheel":
            with zipfile.ZipFile(path) as zf:
                member = Path(zf.extract(f["name"], tmp))
        else:
            member = path / f["name"] if report["kind"] == "directory" else path
        listing = list_entries(binary, member)
        if report["kind"] == "wheel":
            member.unlink()
        compared += 1
        own = [sorted({listing_name(a) for a in f[kind]}, key=arch_sort_key) for kind in ("cubin", "ptx")]
        theirs = [sorted(set(listing.cubin), key=arch_sort_key), sorted(set(listing.ptx), key=arch_sort_key)]
        if own != theirs or f["fatbin_entries"] != len(listing.cubin) + len(listing.ptx):
            differ.append(f["name"])
    return compared, differ
