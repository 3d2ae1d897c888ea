"""ELF files inside a wheel, a directory or a single file, one at a time.

A wheel is never unpacked as a whole: each ELF member is streamed into
memory (small ones) or a memory-mapped temporary file (sgl-kernel's
flash_ops.abi3.so is 850 MB) and dropped after use. A member read whole
(`read_member`) is read within a bound, checked against what it says it holds
and read to one byte past the bound (a 3 MB wheel can inflate to 3 GiB).
Broken zips, non-wheels, encrypted members, unknown compression, bad CRCs and
truncated streams are StackErrors naming the archive, the member and what to do.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import posixpath
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from blackwell_stack import inputfiles
from blackwell_stack.errors import StackError
from blackwell_stack.formats import elf

# Members up to this size are read into memory; bigger ones go through a temp file.
IN_MEMORY_LIMIT = 64 << 20
# The largest member the project reads whole (a METADATA, a RECORD, SGLang's server_args.py) is under 2 MiB.
MEMBER_LIMIT = 64 << 20

# What zipfile raises for a member it cannot give back: a damaged or cut-short stream, an encrypted member
# (RuntimeError), a compression method it does not know (NotImplementedError).
READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError, OSError)


def _looks_like_library(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith((".so", ".cubin", ".o")) or ".so." in base


@dataclass(frozen=True)
class Member:
    name: str  # path inside the wheel or relative to the directory
    size: int


def climbs(name: str) -> bool:
    """Whether a path read from an archive or a RECORD leaves the directory it is relative to (absolute, or
    `..` once normalised: `escape/../../x` as much as `../x`)."""
    normal = posixpath.normpath(name.replace("\\", "/"))
    return normal == ".." or normal.startswith(("/", "../"))


def open_zip(path: str | Path, *, require_wheel: bool = True) -> zipfile.ZipFile:
    """Open path as a zip; a clear StackError when it is not one or is cut short."""
    path = Path(path)
    if not path.is_file():
        raise StackError(f"{path} does not exist or is not a file", "pass the path of a .whl file")
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise StackError(f"{path} is not a readable zip archive ({exc}; {path.stat().st_size} bytes)",
                         "a wheel is a zip file: if the download was interrupted the end of the file (its "
                         "central directory) is missing; download it again") from None
    except OSError as exc:
        raise StackError(f"cannot read {path}: {exc.strerror or exc}") from None
    climbing = next((n for n in zf.namelist() if climbs(n)), None)
    if climbing is not None:
        zf.close()
        raise StackError(f"{path}: member {climbing!r} climbs out of the archive: an installer would write it "
                         "outside the directory it installs into", "this is not a wheel to use: check where it came from")
    if require_wheel and not any(n.endswith(".dist-info/WHEEL") and n.count("/") == 1 for n in zf.namelist()):
        zf.close()
        raise StackError(f"{path} is a zip archive but not a wheel (no <name>.dist-info/WHEEL inside)",
                         "pass a .whl built by pip/poetry/scikit-build, or a directory of installed packages")
    return zf


class _Source:
    """The ELF members of a wheel, a directory or one file (`kind`), opened one at a time by name."""

    kind = ""
    names: list[str]  # every file in it
    elf_members: list[Member]

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.label = str(self.path)

    def open_elf(self, name: str):
        return open_member_elf(self.kind, self.path, name)


class WheelSource(_Source):
    kind = "wheel"

    def __init__(self, path: str | Path):
        super().__init__(path)
        with open_zip(self.path) as zf:
            self.infos = {i.filename: i for i in zf.infolist() if not i.is_dir()}
            self.names = list(self.infos)
            self.elf_members = []
            for info in self.infos.values():
                if not _looks_like_library(info.filename) or info.file_size < 4:
                    continue
                try:
                    with zf.open(info) as fh:
                        head = fh.read(4)
                except READ_ERRORS as exc:
                    raise member_error(self.path, info.filename, exc) from None
                if elf.is_elf(head):
                    self.elf_members.append(Member(info.filename, info.file_size))

    def read_text(self, name: str) -> str | None:
        info = self.infos.get(name)
        if info is None:
            return None
        with open_zip(self.path) as zf:
            return read_member(zf, info, self.path).decode("utf-8", errors="replace")


class DirSource(_Source):
    """ELF files under an installed package directory (or a site-packages)."""

    kind = "directory"

    def __init__(self, path: str | Path):
        super().__init__(path)
        if not self.path.is_dir():
            raise StackError(f"{path} is not a directory")
        self.names = []
        self.elf_members = []
        for root, dirs, files in os.walk(self.path):
            dirs.sort()
            for f in sorted(files):
                full = Path(root, f)
                rel = full.relative_to(self.path).as_posix()
                self.names.append(rel)
                if not _looks_like_library(f) or full.is_symlink() or not full.is_file():
                    continue  # links are read where they point; a FIFO or a device is not a library
                try:
                    with open(full, "rb") as fh:
                        if elf.is_elf(fh.read(4)):
                            self.elf_members.append(Member(rel, full.stat().st_size))
                except OSError:
                    continue

    def read_text(self, name: str) -> str | None:
        p = self.path / name
        if not p.is_file():
            return None
        return inputfiles.read_text(p, limit=inputfiles.TEXT_FILE_LIMIT, errors="replace")


class FileSource(_Source):
    kind = "file"

    def __init__(self, path: str | Path):
        super().__init__(path)
        self.names = [self.path.name]
        with open(self.path, "rb") as fh:
            head = fh.read(4)
        if not elf.is_elf(head):
            raise elf.NotElfError(f"{self.path} is not an ELF file (it starts with {head!r})", elf.NOT_ELF_HINT)
        self.elf_members = [Member(self.path.name, self.path.stat().st_size)]


def open_source(path: str | Path):
    p = Path(path)
    hint = "pass a wheel, an installed package directory, or a .so file"
    if not p.exists():
        raise StackError(f"{p} does not exist", hint)
    if p.is_dir():
        return DirSource(p)
    inputfiles.regular_file(p, hint=hint)  # a FIFO would block the read below; a device never ends
    with open(p, "rb") as fh:
        head = fh.read(4)
    if head[:2] == b"PK" or p.suffix == ".whl":
        return WheelSource(p)
    return FileSource(p)


@contextlib.contextmanager
def map_file(path: Path) -> Iterator[bytes | mmap.mmap]:
    """The file's bytes: small files read, bigger ones copied into a private temporary file and mapped.

    Never the user's file itself: a mapped file that another program shortens kills the process with SIGBUS
    at the next read of a page it no longer has, and no handler can turn that into a message. The copy is
    ours alone; a file that shrinks while it is copied just gives fewer bytes (a parse error, with its name).
    """
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size < 1 << 20:
            yield fh.read(1 << 20)
            return
        with _mapped_copy(fh) as buf:
            yield buf


@contextlib.contextmanager
def _mapped_copy(source: IO[bytes]) -> Iterator[bytes | mmap.mmap]:
    """What is left to read of source, copied into a private temporary file and mapped (b"" when nothing is)."""
    with tempfile.TemporaryFile(prefix="bws-map-") as tmp:
        shutil.copyfileobj(source, tmp, 4 << 20)
        tmp.flush()
        if tmp.tell() == 0:
            yield b""
            return
        with mmap.mmap(tmp.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            yield mm


@contextlib.contextmanager
def open_member_elf(kind: str, root: str | Path, name: str) -> Iterator[elf.ElfFile]:
    """The ElfFile of one member of a source; picklable arguments for worker processes."""
    root = Path(root)
    if kind == "wheel":
        with open_zip(root, require_wheel=False) as zf:
            try:
                info = zf.getinfo(name)
            except KeyError:
                raise StackError(f"{root} has no member {name}") from None
            with materialize(zf, info, root) as buf:
                yield elf.parse(buf, f"{root.name}:{name}")
        return
    path = root / name if kind == "directory" else root
    with map_file(path) as buf:
        yield elf.parse(buf, str(path))


@contextlib.contextmanager
def materialize(zf: zipfile.ZipFile, info: zipfile.ZipInfo, archive: str | Path) -> Iterator[bytes | mmap.mmap]:
    """One member's bytes: in memory when small, else a memory-mapped temp file removed afterwards."""
    try:
        if info.file_size <= IN_MEMORY_LIMIT:
            yield zf.read(info)
            return
        with zf.open(info) as src, _mapped_copy(src) as buf:
            yield buf
    except READ_ERRORS as exc:
        raise member_error(archive, info.filename, exc) from None


def read_member(zf: zipfile.ZipFile, member: str | zipfile.ZipInfo, archive: str | Path, *,
                limit: int = MEMBER_LIMIT) -> bytes:
    """The bytes of member (KeyError when the archive has none of that name)."""
    info = member if isinstance(member, zipfile.ZipInfo) else zf.getinfo(member)
    too_big = StackError(f"{archive}: member {info.filename} inflates to more than {limit >> 20} MiB, far more "
                         "than it can hold", "this is not an archive the command can read: check the file")
    if info.file_size > limit:
        raise too_big
    try:
        with zf.open(info) as fh:
            data = fh.read(limit + 1)
    except READ_ERRORS as exc:
        raise member_error(archive, info.filename, exc) from None
    if len(data) > limit:
        raise too_big
    return data


def member_error(archive: str | Path, name: str, exc: BaseException) -> StackError:
    return StackError(f"{archive}: member {name} cannot be read ({type(exc).__name__}: {exc})",
                      "the archive is damaged, encrypted or compressed in a way wheels never are: download it again")
