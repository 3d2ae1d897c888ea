"""A small ELF reader: what `inspect` and `doctor abi` need, nothing more.

Reads the header (class, byte order, machine), the section table, the
dynamic section (DT_NEEDED, DT_SONAME, DT_RUNPATH), the dynamic symbol table
and the GNU build ID. It works on any buffer that supports slicing and
`struct.unpack_from` (bytes or an mmap), so a 850 MB library is read through
the page cache instead of being copied into memory.

Every malformed input raises NotElfError or BadElfError (StackErrors with a
hint), never struct.error or IndexError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from blackwell_stack.errors import StackError

ELF_MAGIC = b"\x7fELF"

# e_machine values worth naming (elf.h).
MACHINES = {
    3: "x86",
    20: "ppc",
    21: "ppc64",
    22: "s390",
    40: "arm",
    62: "x86_64",
    183: "aarch64",
    190: "cuda",
    243: "riscv",
    258: "loongarch",
}

SHT_NOTE = 7
SHT_DYNAMIC = 6
SHT_NOBITS = 8
SHT_DYNSYM = 11
SHN_UNDEF = 0
SHN_XINDEX = 0xFFFF

DT_NULL = 0
DT_NEEDED = 1
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29

STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_COMMON, STT_TLS, STT_GNU_IFUNC = range(8)

NT_GNU_BUILD_ID = 3


class NotElfError(StackError):
    """The file is not an ELF object at all (wrong magic)."""


class BadElfError(StackError):
    """The file says it is ELF but its tables do not fit inside it (truncated or corrupt)."""


@dataclass(frozen=True)
class Section:
    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True)
class Symbol:
    name: str
    binding: int
    type: int
    section_index: int
    value: int
    size: int

    @property
    def defined(self) -> bool:
        return self.section_index != SHN_UNDEF

    @property
    def weak(self) -> bool:
        return self.binding == STB_WEAK


@dataclass
class ElfFile:
    """A parsed ELF image; `data` stays referenced for section reads."""

    label: str
    data: Any = field(repr=False)  # bytes or an mmap
    bits: int = 64
    little_endian: bool = True
    elf_type: int = 0
    machine: int = 0
    flags: int = 0
    sections: list[Section] = field(default_factory=list)

    @property
    def machine_name(self) -> str:
        return MACHINES.get(self.machine, f"machine {self.machine}")

    @property
    def _end(self) -> str:
        return "<" if self.little_endian else ">"

    def section(self, name: str) -> Section | None:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def section_bytes(self, sec: Section):
        """The section's contents (a view into the file; empty for NOBITS)."""
        if sec.type == SHT_NOBITS or sec.size == 0:
            return b""
        return self.data[sec.offset : sec.offset + sec.size]

    # -- dynamic section -------------------------------------------------

    def dynamic_entries(self) -> list[tuple[int, int]]:
        sec = next((s for s in self.sections if s.type == SHT_DYNAMIC), None)
        if sec is None:
            return []
        fmt = self._end + ("qQ" if self.bits == 64 else "iI")
        step = struct.calcsize(fmt)
        raw = self.section_bytes(sec)
        out = []
        for off in range(0, len(raw) - step + 1, step):
            tag, val = struct.unpack_from(fmt, raw, off)
            if tag == DT_NULL:
                break
            out.append((tag, val))
        return out

    def _dynamic_strings(self, tag: int) -> list[str]:
        sec = next((s for s in self.sections if s.type == SHT_DYNAMIC), None)
        if sec is None:
            return []
        strtab = self._linked(sec)
        return [_cstring(strtab, val) for t, val in self.dynamic_entries() if t == tag]

    @property
    def needed(self) -> list[str]:
        """DT_NEEDED: the shared libraries the dynamic loader must find."""
        return self._dynamic_strings(DT_NEEDED)

    @property
    def soname(self) -> str | None:
        names = self._dynamic_strings(DT_SONAME)
        return names[0] if names else None

    @property
    def runpath(self) -> list[str]:
        return self._dynamic_strings(DT_RUNPATH) + self._dynamic_strings(DT_RPATH)

    # -- symbols ---------------------------------------------------------

    def dynamic_symbols(self) -> list[Symbol]:
        sec = next((s for s in self.sections if s.type == SHT_DYNSYM), None)
        return self._symbols(sec) if sec else []

    def _symbols(self, sec: Section) -> list[Symbol]:
        strtab = self._linked(sec)
        raw = self.section_bytes(sec)
        if self.bits == 64:
            fmt = self._end + "IBBHQQ"
        else:
            fmt = self._end + "IIIBBH"
        step = struct.calcsize(fmt)
        out = []
        for fields in struct.iter_unpack(fmt, raw[: len(raw) - len(raw) % step]):
            if self.bits == 64:
                name_off, info, _other, shndx, value, size = fields
            else:
                name_off, value, size, info, _other, shndx = fields
            if name_off == 0:
                continue
            out.append(Symbol(_cstring(strtab, name_off), info >> 4, info & 0xF, shndx, value, size))
        return out

    def _linked(self, sec: Section):
        if not 0 <= sec.link < len(self.sections):
            raise BadElfError(f"{self.label}: section {sec.name!r} links to missing section {sec.link}")
        return self.section_bytes(self.sections[sec.link])

    # -- notes -----------------------------------------------------------

    @property
    def build_id(self) -> str | None:
        """The GNU build ID (hex), which differs between otherwise identical builds when paths differ."""
        for sec in self.sections:
            if sec.type != SHT_NOTE:
                continue
            raw = self.section_bytes(sec)
            off = 0
            while off + 12 <= len(raw):
                namesz, descsz, ntype = struct.unpack_from(self._end + "III", raw, off)
                name_start = off + 12
                desc_start = name_start + _align4(namesz)
                if ntype == NT_GNU_BUILD_ID and bytes(raw[name_start : name_start + namesz]) == b"GNU\0":
                    return bytes(raw[desc_start : desc_start + descsz]).hex()
                off = desc_start + _align4(descsz)
        return None


def _align4(n: int) -> int:
    return (n + 3) & ~3


def _cstring(table, offset: int) -> str:
    if offset >= len(table):
        return ""
    end = table.find(b"\0", offset)
    if end < 0:
        end = len(table)
    return bytes(table[offset:end]).decode("utf-8", errors="replace")


def is_elf(head: bytes) -> bool:
    return bytes(head[:4]) == ELF_MAGIC


def parse(data, label: str = "<buffer>") -> ElfFile:
    """Parse the ELF header and section table of data (bytes or mmap)."""
    if len(data) < 16 or not is_elf(data[:4]):
        raise NotElfError(
            f"{label} is not an ELF file (it starts with {bytes(data[:4])!r})",
            "pass a shared library (.so), a wheel, or a directory of installed packages",
        )
    ei_class, ei_data = data[4], data[5]
    if ei_class not in (1, 2) or ei_data not in (1, 2):
        raise BadElfError(f"{label}: unknown ELF class {ei_class} or byte order {ei_data}", "the file is corrupt")
    elf = ElfFile(label=label, data=data, bits=64 if ei_class == 2 else 32, little_endian=ei_data == 1)
    end = elf._end
    try:
        if elf.bits == 64:
            (e_type, e_machine, _v, _entry, _phoff, e_shoff, e_flags, _ehsize, _phentsize, _phnum, e_shentsize,
             e_shnum, e_shstrndx) = struct.unpack_from(end + "HHIQQQIHHHHHH", data, 16)
            sh_fmt = end + "IIQQQQIIQQ"
        else:
            (e_type, e_machine, _v, _entry, _phoff, e_shoff, e_flags, _ehsize, _phentsize, _phnum, e_shentsize,
             e_shnum, e_shstrndx) = struct.unpack_from(end + "HHIIIIIHHHHHH", data, 16)
            sh_fmt = end + "IIIIIIIIII"
    except struct.error:
        raise BadElfError(
            f"{label}: the ELF header is truncated", "the file is incomplete; download it again"
        ) from None
    elf.elf_type, elf.machine, elf.flags = e_type, e_machine, e_flags
    if e_shoff == 0:
        return elf  # no section table (stripped to program headers only)
    sh_size = struct.calcsize(sh_fmt)
    if e_shentsize != sh_size:
        raise BadElfError(f"{label}: section header size {e_shentsize}, expected {sh_size}", "the file is corrupt")
    raw_headers = []
    try:
        first = struct.unpack_from(sh_fmt, data, e_shoff)
        count = e_shnum or first[5]  # more than 0xff00 sections: the count lives in section 0's sh_size
        if e_shstrndx == SHN_XINDEX:
            e_shstrndx = first[6]
        if e_shoff + count * sh_size > len(data):
            raise struct.error
        for i in range(count):
            raw_headers.append(struct.unpack_from(sh_fmt, data, e_shoff + i * sh_size))
    except struct.error:
        raise BadElfError(
            f"{label}: the section table (offset {e_shoff}) lies beyond the end of the file ({len(data)} bytes)",
            "the file is truncated; download or extract it again",
        ) from None
    size_limit = len(data)
    for i, h in enumerate(raw_headers):
        _name_off, sh_type, flags, addr, offset, size, link, info, _align, entsize = h
        if sh_type != SHT_NOBITS and size and offset + size > size_limit:
            raise BadElfError(
                f"{label}: section {i} ends at byte {offset + size}, beyond the end of the file ({size_limit} bytes)",
                "the file is truncated; download or extract it again",
            )
        elf.sections.append(Section(i, "", sh_type, flags, addr, offset, size, link, info, entsize))
    if 0 < e_shstrndx < len(elf.sections):
        names = elf.section_bytes(elf.sections[e_shstrndx])
        elf.sections = [
            Section(s.index, _cstring(names, h[0]), s.type, s.flags, s.addr, s.offset, s.size, s.link, s.info,
                    s.entsize)
            for s, h in zip(elf.sections, raw_headers)
        ]
    return elf
