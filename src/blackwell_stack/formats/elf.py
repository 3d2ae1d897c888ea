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
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from blackwell_stack.errors import StackError

ELF_MAGIC = b"\x7fELF"

# e_machine values worth naming (elf.h).
MACHINES = {3: "x86", 20: "ppc", 21: "ppc64", 22: "s390", 40: "arm", 62: "x86_64", 183: "aarch64", 190: "cuda",
            243: "riscv", 258: "loongarch"}

SHT_DYNAMIC, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 6, 7, 8, 11
SHN_UNDEF, SHN_XINDEX = 0, 0xFFFF
DT_NULL, DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 14, 15, 29
STB_LOCAL, STB_WEAK = 0, 2
STT_FUNC, STT_GNU_IFUNC = 2, 10
NT_GNU_BUILD_ID = 3
NOT_ELF_HINT = "pass a shared library (.so), a wheel, or a directory of installed packages"
TRUNCATED_HINT = "the file is truncated; download or extract it again"


class NotElfError(StackError):
    """The file is not an ELF object at all (wrong magic)."""


class BadElfError(StackError):
    """The file says it is ELF but its tables do not fit inside it (truncated or corrupt)."""


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int


@dataclass(frozen=True)
class Symbol:
    name: str
    binding: int
    type: int
    section_index: int

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
    machine: int = 0
    sections: list[Section] = field(default_factory=list)

    @property
    def machine_name(self) -> str:
        return MACHINES.get(self.machine, f"machine {self.machine}")

    @property
    def _end(self) -> str:
        return "<" if self.little_endian else ">"

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def section_bytes(self, sec: Section):
        """The section's contents (a view into the file; empty for NOBITS)."""
        if sec.type == SHT_NOBITS or sec.size == 0:
            return b""
        return self.data[sec.offset : sec.offset + sec.size]

    def _records(self, sec: Section, fmt: str) -> Iterator[tuple[Any, ...]]:
        """The section's fixed-size records, unpacked with `fmt` (a partial record at its end is left out)."""
        raw = self.section_bytes(sec)
        step = struct.calcsize(self._end + fmt)
        return struct.iter_unpack(self._end + fmt, raw[: len(raw) - len(raw) % step])

    def _dynamic_strings(self, tag: int) -> list[str]:
        """The strings the dynamic section's entries of `tag` name, up to its DT_NULL."""
        sec = next((s for s in self.sections if s.type == SHT_DYNAMIC), None)
        if sec is None:
            return []
        strtab = self._linked(sec)
        out = []
        for entry_tag, value in self._records(sec, "qQ" if self.bits == 64 else "iI"):
            if entry_tag == DT_NULL:
                break
            if entry_tag == tag:
                out.append(_cstring(strtab, value))
        return out

    @property
    def needed(self) -> list[str]:
        """DT_NEEDED: the shared libraries the dynamic loader must find."""
        return self._dynamic_strings(DT_NEEDED)

    @property
    def soname(self) -> str | None:
        return next(iter(self._dynamic_strings(DT_SONAME)), None)

    @property
    def runpath(self) -> list[str]:
        return self._dynamic_strings(DT_RUNPATH) + self._dynamic_strings(DT_RPATH)

    def dynamic_symbols(self) -> list[Symbol]:
        sec = next((s for s in self.sections if s.type == SHT_DYNSYM), None)
        if sec is None:
            return []
        strtab = self._linked(sec)
        out = []
        for fields in self._records(sec, "IBBHQQ" if self.bits == 64 else "IIIBBH"):
            if self.bits == 64:
                name_off, info, _other, shndx, _value, _size = fields
            else:
                name_off, _value, _size, info, _other, shndx = fields
            if name_off:
                out.append(Symbol(_cstring(strtab, name_off), info >> 4, info & 0xF, shndx))
        return out

    def _linked(self, sec: Section):
        if not 0 <= sec.link < len(self.sections):
            raise BadElfError(f"{self.label}: section {sec.name!r} links to missing section {sec.link}")
        return self.section_bytes(self.sections[sec.link])

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
    end = table.find(b"\0", offset)
    return bytes(table[offset:end if end >= 0 else len(table)]).decode("utf-8", errors="replace")


def is_elf(head: bytes) -> bool:
    return bytes(head[:4]) == ELF_MAGIC


def parse(data, label: str = "<buffer>") -> ElfFile:
    if len(data) < 16 or not is_elf(data[:4]):
        raise NotElfError(f"{label} is not an ELF file (it starts with {bytes(data[:4])!r})", NOT_ELF_HINT)
    ei_class, ei_data = data[4], data[5]
    if ei_class not in (1, 2) or ei_data not in (1, 2):
        raise BadElfError(f"{label}: unknown ELF class {ei_class} or byte order {ei_data}", "the file is corrupt")
    elf = ElfFile(label=label, data=data, bits=64 if ei_class == 2 else 32, little_endian=ei_data == 1)
    header, sh_fmt = ("HHIQQQIHHHHHH", "IIQQQQIIQQ") if elf.bits == 64 else ("HHIIIIIHHHHHH", "IIIIIIIIII")
    sh_fmt = elf._end + sh_fmt
    try:
        (_type, elf.machine, _v, _entry, _phoff, e_shoff, _flags, _ehsize, _phentsize, _phnum, e_shentsize,
         e_shnum, e_shstrndx) = struct.unpack_from(elf._end + header, data, 16)
    except struct.error:
        raise BadElfError(f"{label}: the ELF header is truncated", "the file is incomplete; download it again") from None
    if e_shoff == 0:
        return elf  # no section table (stripped to program headers only)
    sh_size = struct.calcsize(sh_fmt)
    if e_shentsize != sh_size:
        raise BadElfError(f"{label}: section header size {e_shentsize}, expected {sh_size}", "the file is corrupt")
    try:
        first = struct.unpack_from(sh_fmt, data, e_shoff)
        count = e_shnum or first[5]  # more than 0xff00 sections: the count lives in section 0's sh_size
        if e_shstrndx == SHN_XINDEX:
            e_shstrndx = first[6]
        if e_shoff + count * sh_size > len(data):
            raise struct.error
        raw_headers = [struct.unpack_from(sh_fmt, data, e_shoff + i * sh_size) for i in range(count)]
    except struct.error:
        raise BadElfError(f"{label}: the section table (offset {e_shoff}) lies beyond the end of the file "
                          f"({len(data)} bytes)", TRUNCATED_HINT) from None
    for i, (_name_off, sh_type, flags, _addr, offset, size, link, _info, _align, _entsize) in enumerate(raw_headers):
        if sh_type != SHT_NOBITS and size and offset + size > len(data):
            raise BadElfError(f"{label}: section {i} ends at byte {offset + size}, beyond the end of the file "
                              f"({len(data)} bytes)", TRUNCATED_HINT)
        elf.sections.append(Section("", sh_type, flags, offset, size, link))
    if 0 < e_shstrndx < len(elf.sections):
        names = elf.section_bytes(elf.sections[e_shstrndx])
        elf.sections = [replace(s, name=_cstring(names, h[0])) for s, h in zip(elf.sections, raw_headers)]
    return elf
