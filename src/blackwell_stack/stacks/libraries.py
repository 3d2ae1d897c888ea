"""What the locked wheels of a stack hold: the audit that `stack audit` writes to wheels.json.

For the file each package installs on the stack's target (data/wheel_choice.py:
uv's choice, which the Nix set takes too), the real wheel is downloaded from
the URL in uv.lock and refused unless its sha256 is the lock's. From it:

- every ELF file's DT_NEEDED, and for each library the wheel does not ship,
  where nixpkgs' autoPatchelf can find it (it looks by file name): in another
  locked wheel, in glibc/libstdc++ (`system`), in the NVIDIA driver
  (`driver`), or nowhere (`missing`);
- RUNPATH entries relative to the library (`$ORIGIN...`), which autoPatchelf
  replaces and the Nix set appends again;
- every install path two or more wheels share, and whether the files are the
  same (zip CRC-32 and size; ELF files always differ once patched);
- METADATA requirements and the torch symbols of libraries that link torch,
  for the torch pairing checks (stacks.pairing).

wheels.json is what the Nix fixups read (nix/fixups/) and what `plan` reports
as checked; tests derive it again from the wheels and compare.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from email.parser import HeaderParser
from pathlib import Path
from typing import Any, TypeVar

from blackwell_stack import inputfiles, parallel
from blackwell_stack.data import lock as lockfile
from blackwell_stack.data import registry
from blackwell_stack.data import wheel_choice as wheels
from blackwell_stack.data.lock import Lock, LockedPackage
from blackwell_stack.data.stack import Stack
from blackwell_stack.download import download
from blackwell_stack.errors import HashMismatch, NetworkError, StackError
from blackwell_stack.fileio import atomic_write_json
from blackwell_stack.formats import elf, linkage, remote_zip, wheelzip
from blackwell_stack.hashes import sha256_file
from blackwell_stack.paths import cache_dir
from blackwell_stack.stacks import pairing

T = TypeVar("T")
SCHEMA_VERSION = 1
AUDIT_FILE = "wheels.json"
CACHE_VERSION = 5

# glibc, libgcc and libstdc++: the part of nixpkgs' pythonManylinuxPackages
# (pkgs/development/interpreters/python/manylinux/default.nix, the PEP 599
# list) that uv2nix gives every manylinux wheel, and glibc's own loader and
# libraries, which autoPatchelf leaves to the dynamic linker.
SYSTEM_LIBRARIES = frozenset({
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libutil.so.1",
    "libresolv.so.2", "libnsl.so.1", "libmvec.so.1", "libanl.so.1", "ld-linux-x86-64.so.2",
    "libgcc_s.so.1", "libstdc++.so.6",
})
# From the host's NVIDIA driver (/run/opengl-driver/lib on NixOS), never from a package.
DRIVER_LIBRARIES = frozenset({"libcuda.so.1", "libnvidia-ml.so.1"})

_LIBRARY_NAME = re.compile(r"\.so(\.\d+)*$")
# A driver library's name in Python source (libcuda.so, libcuda.so.1, libnvidia-ml.so.1): what ctypes may load by
# name from the interpreter, which has no RUNPATH, so no fixup of an ELF file reaches it.
_DRIVER_NAME_IN_SOURCE = re.compile(rb"\b(libcuda|libnvidia-ml)\.so(\.[0-9]+)*")
_TEXT_SUFFIXES = (".py", ".pyi", ".pyc", ".txt", ".md", ".json", ".h", ".hpp", ".cuh", ".cu", ".c", ".cc", ".cpp",
                  ".inl", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".html", ".rst", ".typed", ".pxd", ".pyx")


def _maybe_elf(name: str) -> bool:
    """Members worth opening: shared objects, and executables in a bin/ directory or among a wheel's
    .data/scripts (ninja's and py-spy's binaries are installed that way)."""
    base = name.rsplit("/", 1)[-1]
    if _LIBRARY_NAME.search(base):
        return True
    parts = name.split("/")
    in_bin = "bin" in parts[:-1] or (len(parts) == 3 and parts[0].endswith(".data") and parts[1] == "scripts")
    return in_bin and not base.endswith(_TEXT_SUFFIXES) and not base.startswith(".")


def is_torch_symbol(name: str) -> bool:
    """torch's C++ symbols (c10::, at::, torch::) and its stable C ABI (aoti_torch_*, torch_*)."""
    return linkage.is_torch_symbol(name) or name.startswith(("aoti_torch_", "torch_"))


def install_path(member: str) -> str | None:
    """Where a wheel member lands, relative to site-packages (`<scheme>/...` for other .data schemes).

    None for the package's own .dist-info, which no other package shares.
    """
    first, _, rest = member.partition("/")
    if first.endswith(".dist-info"):
        return None
    if first.endswith(".data"):
        scheme, _, path = rest.partition("/")
        return path if scheme in ("purelib", "platlib") else f"<{scheme}>/{path}"
    return member


@dataclass
class ElfInfo:
    needed: list[str]
    runpath: list[str]
    executable: bool
    dlopen_note: bool
    # driver libraries whose file name is in the file's bytes: what it may dlopen (libcudart names libcuda.so.1
    # without DT_NEEDing it); glibc searches only the caller's own RUNPATH for them
    driver_names: list[str] = field(default_factory=list)
    # torch symbols the file leaves undefined (only for files that link torch's libraries)
    torch_undefined: list[str] = field(default_factory=list)


@dataclass
class WheelContents:
    package: str
    filename: str
    sha256: str  # checked against the lock when the file was read
    checked: str  # how and when: "downloaded from <url> on <date>"
    members: dict[str, tuple[int, int]]  # name -> (CRC-32, size)
    requires: list[str] = field(default_factory=list)  # METADATA Requires-Dist
    elf: dict[str, ElfInfo] = field(default_factory=dict)
    torch_defined: list[str] = field(default_factory=list)  # torch's own libraries: what they define
    python_driver_names: dict[str, list[str]] = field(default_factory=dict)  # .py member -> driver names in it

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WheelContents:
        fields = dict(data)
        fields["members"] = {k: (v[0], v[1]) for k, v in data["members"].items()}
        fields["elf"] = {k: ElfInfo(**v) for k, v in data["elf"].items()}
        return cls(**fields)


def remote_file(wheel: dict) -> remote_zip.RemoteFile:
    """A locked wheel as a file to read by range requests (URL, sha256 and size from the lock)."""
    url, digest = wheel.get("url"), lockfile.sha256_of(wheel)
    if not url or not digest or not wheel.get("size"):
        raise StackError(f"{wheels.filename(wheel)}: the lock gives no URL, sha256 and size for it",
                         "lock the stack again with its lock command")
    return remote_zip.RemoteFile(wheels.filename(wheel), url, digest, wheel["size"])


def _open(stack: Stack, package: LockedPackage, wheel: dict, digest: str, workdir: Path) -> tuple[Path, str]:
    """The wheel as a local file whose sha256 is the lock's, and how that was checked."""
    path = stack.local_wheel(package, wheel)
    today = dt.date.today().isoformat()
    if path is not None:
        if not path.is_file():
            raise StackError(f"{path} is missing: {stack.relpath}/uv.lock takes {package.name} from it",
                             f"put the kept wheels back: {stack.lock_command}")
        found = sha256_file(path)
        if found != digest:
            raise HashMismatch(f"{path}: sha256 {found}, but {stack.relpath}/uv.lock says {digest}",
                               "this is not the file the lock was made with")
        return path, f"hashed from the kept file {path.name} on {today}"
    url = wheel.get("url")
    if not url:
        raise StackError(f"{wheels.filename(wheel)} ({package.name}) has neither URL nor path in {stack.relpath}/uv.lock",
                         f"lock again: {stack.lock_command}")
    dest = workdir / wheels.filename(wheel)
    try:
        download(url, dest, expected_sha256=digest, expected_size=wheel.get("size"), label=dest.name)
    except NetworkError as exc:
        raise NetworkError(f"{package.name}: {exc.message}",
                           "the audit downloads every locked wheel from its URL: check the network and run it again "
                           "(what was read is cached)") from None
    return dest, f"downloaded from its URL in uv.lock and hashed on {today}"


def _read_elf(zf: zipfile.ZipFile, name: str, contents: WheelContents) -> None:
    """The member's ELF facts into contents.elf (and, for torch's own libraries, the torch symbols they define)."""
    with wheelzip.materialize(zf, zf.getinfo(name), contents.filename) as buf:
        if not elf.is_elf(buf[:4]):
            return
        e = elf.parse(buf, name)
        facts = ElfInfo(e.needed, e.runpath, e.section(".interp") is not None, e.section(".note.dlopen") is not None,
                        sorted(lib for lib in DRIVER_LIBRARIES if buf.find(lib.encode() + b"\0") >= 0))
        if contents.package == "torch" and name.rsplit("/", 1)[-1] in linkage.TORCH_LIBRARIES:
            contents.torch_defined += [s.name for s in e.dynamic_symbols() if s.defined and is_torch_symbol(s.name)]
        elif linkage.torch_libraries(facts.needed):
            facts.torch_undefined = sorted({s.name for s in e.dynamic_symbols()
                                            if not s.defined and not s.weak and is_torch_symbol(s.name)})
        contents.elf[name] = facts


def read_wheel(stack: Stack, package: LockedPackage, wheel: dict) -> WheelContents:
    """One locked wheel, checked against the lock's sha256; cached by that sha256."""
    digest = lockfile.sha256_of(wheel)
    if digest is None:
        raise StackError(f"{wheels.filename(wheel)} ({package.name}) has no sha256 in {stack.relpath}/uv.lock",
                         f"every locked file needs one: lock again with `{stack.lock_command}`")
    cached = cache_dir("wheel-contents", f"v{CACHE_VERSION}") / f"{digest}.json"
    known = read_cached(cached, WheelContents.from_json)
    if known is not None:
        return known
    with tempfile.TemporaryDirectory(prefix="bws-wheel-") as tmp:
        path, checked = _open(stack, package, wheel, digest, Path(tmp))
        with wheelzip.open_zip(path) as zf:
            contents = WheelContents(package.name, wheels.filename(wheel), digest, checked,
                                     {i.filename: (i.CRC, i.file_size) for i in zf.infolist() if not i.is_dir()})
            metadata = [n for n in contents.members if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(metadata) == 1:
                text = wheelzip.read_member(zf, metadata[0], path).decode("utf-8", errors="replace")
                contents.requires = HeaderParser().parsestr(text).get_all("Requires-Dist") or []
            for name, (_crc, size) in contents.members.items():
                if name.endswith(".py"):
                    found_names = sorted({m.group(0).decode() for m in _DRIVER_NAME_IN_SOURCE.finditer(wheelzip.read_member(zf, name, path))})
                    if found_names:
                        contents.python_driver_names[name] = found_names
                elif size >= 64 and _maybe_elf(name):
                    _read_elf(zf, name, contents)
    contents.torch_defined = sorted(set(contents.torch_defined))
    atomic_write_json(cached, asdict(contents))
    return contents


def read_cached(path: Path, parse: Callable[[Any], T]) -> T | None:
    """What this tool cached as JSON at `path`, parsed; None (the file removed) when it is not what it wrote."""
    if not path.is_file():
        return None
    try:
        return parse(json.loads(inputfiles.read_text(path, limit=inputfiles.DATA_FILE_LIMIT)))
    except (ValueError, KeyError, TypeError, StackError):
        path.unlink()
        return None


def read_all(stack: Stack, lock: Lock, *, jobs: int = 4) -> dict[str, WheelContents]:
    """Every package's installed wheel, read (and its sha256 checked) in parallel."""
    chosen = sorted(stack.chosen_wheels(lock).items())
    read = parallel.run_all(lambda item: read_wheel(stack, *item[1]), chosen, jobs=jobs)
    return {name: contents for (name, _), contents in zip(chosen, read)}


def closure(lock: Lock, name: str) -> set[str]:
    """A package and every package it depends on, transitively, extras included (the lock's graph)."""
    todo: list[tuple[str, tuple[str, ...]]] = [(name, ())]
    done: set[tuple[str, tuple[str, ...]]] = set()
    while todo:
        current, extras = todo.pop()
        pkg = lock.get(current)
        if pkg is None or (current, extras) in done:
            continue
        done.add((current, extras))
        for dep in pkg.dependencies:
            todo.append((dep, tuple(pkg.dependency_extras.get(dep, []))))
        for extra in extras:
            todo.extend((dep, ()) for dep in pkg.optional_dependencies.get(extra, []))
    return {current for current, _ in done}


def library_needs(lock: Lock, contents: dict[str, WheelContents]) -> dict[str, Any]:
    """For each wheel with ELF files: what it links outside itself and where that is found."""
    providers: dict[str, set[str]] = {}
    for name, c in contents.items():
        for member in c.members:
            base = member.rsplit("/", 1)[-1]
            if _LIBRARY_NAME.search(base):
                providers.setdefault(base, set()).add(name)
    out = {}
    for name, c in contents.items():
        if not c.elf:
            continue
        own = {m.rsplit("/", 1)[-1] for m in c.members}
        deps = closure(lock, name) - {name}
        needs: dict[str, Any] = {}
        for info in c.elf.values():
            for lib in info.needed:
                if lib in own or lib in needs:
                    continue
                if lib in SYSTEM_LIBRARIES:
                    needs[lib] = "system"
                elif lib in DRIVER_LIBRARIES:
                    needs[lib] = "driver"
                elif lib in providers:
                    found = sorted(providers[lib] - {name})
                    in_deps = [p for p in found if p in deps]
                    needs[lib] = {"from": in_deps or found, "dependency": bool(in_deps)}
                else:
                    needs[lib] = "missing"
        out[name] = {
            "file": c.filename,
            "elf_files": len(c.elf),
            "executables": sorted(m for m, i in c.elf.items() if i.executable),
            "dlopen_notes": sorted(m for m, i in c.elf.items() if i.dlopen_note),
            "driver_names": sorted({lib for i in c.elf.values() for lib in i.driver_names}),
            "origin_runpaths": sorted({entry.replace("${ORIGIN}", "$ORIGIN") for i in c.elf.values() for path in i.runpath
                                       for entry in path.split(":") if "ORIGIN" in entry}),
            "needs": dict(sorted(needs.items())),
        }
    return out


def shared_paths(contents: dict[str, WheelContents]) -> list[dict[str, Any]]:
    """Install paths two or more wheels ship, and whether a venv can merge them (same bytes, not ELF)."""
    where: dict[str, list[tuple[str, str]]] = {}
    for name, c in contents.items():
        for member in c.members:
            path = install_path(member)
            if path is not None:
                where.setdefault(path, []).append((name, member))
    out = []
    for path, owners in sorted(where.items()):
        if len(owners) < 2:
            continue
        stamps = {contents[n].members[m] for n, m in owners}
        is_elf = any(m in contents[n].elf for n, m in owners)
        out.append({"path": path, "packages": sorted(n for n, _ in owners),
                    "identical": len(stamps) == 1 and not is_elf, "elf": is_elf})
    return out


def audit(stack: Stack, lock: Lock, contents: dict[str, WheelContents]) -> dict[str, Any]:
    """wheels.json of a stack: checked files, wheel choices, libraries, shared paths, torch pairs."""
    tgt = stack.target()
    choices = {}
    kept = {}
    for name, (pkg, wheel) in stack.chosen_wheels(lock).items():
        nix = wheels.uv2nix_choice(pkg, tgt)
        if nix is not None and wheels.filename(nix) != wheels.filename(wheel):
            choices[name] = wheels.filename(wheel)
        if stack.local_wheel(pkg, wheel) is not None:
            kept[name] = {"file": wheels.filename(wheel), "hash": wheel.get("hash")}
    return {
        "schema_version": SCHEMA_VERSION,
        "description": (
            f"What the locked wheels of the {stack.name} stack hold, from the wheels themselves: written by "
            f"`blackwell-stack stack audit {stack.name} --write`, which downloads each package's file from its "
            "URL in uv.lock and refuses it unless its sha256 is the lock's. Tests read the wheels again and "
            "compare. `files`: the file each package installs on the target and how its sha256 was checked. "
            "`choices`: packages whose file uv2nix alone would pick differently from uv (the first in lock order "
            "instead of the newest manylinux the target's glibc allows); the Nix set takes uv's. `kept_wheels`: "
            "files the lock takes from the stack's local wheels/ directory, which Nix fetches by name and hash. "
            "`libraries`: for each wheel with ELF files, every DT_NEEDED library it does not ship and where "
            "autoPatchelf finds it by file name: `system` (glibc, libstdc++), `driver` (the NVIDIA driver), "
            "`from` (other locked wheels; `dependency`: one of them is in the package's own dependency "
            "closure) or `missing` (nix/fixups/wheel-libraries.json says why); `driver_names`: the driver libraries "
            "named in its ELF files, which they may dlopen, so their own RUNPATH must reach the driver. `driver_by_name`: the "
            "Python files that name a driver library, which ctypes may load by name from the interpreter, where no "
            "RUNPATH applies (nix/fixups/wheel-libraries.json says what each gets). `collisions`: install paths "
            "that two or more wheels share (nix/fixups/env-collisions.json). `torch_pairs`: each package "
            "that links torch, checked as stack.json says."
        ),
        "lock_sha256": lock.sha256,
        "target": {"system": stack.system, "python": stack.python, "glibc": ".".join(map(str, tgt.glibc))},
        "files": {name: {"file": c.filename, "sha256": c.sha256, "checked": c.checked} for name, c in contents.items()},
        "choices": dict(sorted(choices.items())),
        "kept_wheels": dict(sorted(kept.items())),
        "libraries": library_needs(lock, contents),
        "driver_by_name": {name: c.python_driver_names for name, c in contents.items() if c.python_driver_names},
        "collisions": shared_paths(contents),
        "torch_pairs": pairing.check(stack, lock, contents),
    }


def load_audit(stack: Stack) -> dict[str, Any]:
    """The stack's wheels.json, checked (registry); a StackError, not a DataError, when there is none yet."""
    return registry.load(
        "audit", file=stack.path / AUDIT_FILE,
        hint=f"write it again with `blackwell-stack stack audit {stack.name} --write`",
        missing=StackError(f"{stack.relpath}/{AUDIT_FILE} is missing",
                           f"write it with `blackwell-stack stack audit {stack.name} --write`"))


def audit_is_current(stack: Stack, data: dict[str, Any]) -> bool:
    """Whether wheels.json was made from the uv.lock that is there now."""
    return stack.locked and data.get("lock_sha256") == stack.lock().sha256


def write_audit(stack: Stack, data: dict[str, Any]) -> Path:
    path = stack.path / AUDIT_FILE
    atomic_write_json(path, data)
    return path
