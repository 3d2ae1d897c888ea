"""Reads the CUDA fat binaries embedded in a host ELF (`.nv_fatbin`).

The dependency-free path of `inspect`: it lists each embedded cubin and PTX
with its architecture from the entry headers alone, so compressed entries
(LZ4 before CUDA 12.8, zstd after) are reported without decompressing them.

Layout (little endian, checked against nvcc 13.0 output and cuobjdump 13.x):
a container header {u32 magic 0xBA55ED50, u16 version, u16 header size,
u64 size of the entries}, then entries back to back, each {u16 kind
(1 PTX, 2 cubin), u16 version, u32 header size, u64 payload size (padded),
u32 compressed size, u32, u16 minor, u16 major, u32 sm number, u32, u32,
u64 flags, ...}. Flag bits: 0x2000 LZ4, 0x8000 zstd, 0x100000 arch-specific
("sm_120a"), 0x200000 family ("sm_100f"). A section may hold many containers.
The format is undocumented; the public reverse-engineered description in
GrigoryEvko/nvopen-tools fatbin/FORMAT_SPECIFICATION.md agrees.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from blackwell_stack.formats.elf import BadElfError, ElfFile

FATBIN_MAGIC = 0xBA55ED50
RELOCATABLE_FATBIN_MAGIC = 0x466243B1  # __nv_relfatbin of -rdc objects

KIND_PTX = 1
KIND_CUBIN = 2
KIND_CUBIN_ALT = 0x10

FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000

# .nv_fatbin holds the code the CUDA runtime loads; __nv_relfatbin holds relocatable
# device code kept for device linking (-rdc, e.g. NVSHMEM in libtorch_nvshmem.so),
# which never runs as is and which `cuobjdump --list-elf` does not list either.
LOADABLE_SECTION = ".nv_fatbin"
RELOCATABLE_SECTION = "__nv_relfatbin"

_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQ")  # the first 48 bytes of an entry header


@dataclass(frozen=True)
class FatbinEntry:
    kind: str  # "cubin" or "ptx"
    arch: str  # "sm_120a", "sm_100f", "sm_90"
    compression: str | None  # None, "lz4" or "zstd"
    version: str  # code version as cuobjdump prints it: "1.8" for a cubin, PTX ISA "9.0"


def arch_name(sm: int, flags: int) -> str:
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
    return f"sm_{sm}{suffix}"


def parse_fatbin(raw, label: str = "<fatbin>") -> list[FatbinEntry]:
    """Every entry of every container in raw (the bytes of a .nv_fatbin section)."""
    entries: list[FatbinEntry] = []
    pos = 0
    while pos + _CONTAINER.size <= len(raw):
        magic, _version, header_size, fat_size = _CONTAINER.unpack_from(raw, pos)
        if magic not in (FATBIN_MAGIC, RELOCATABLE_FATBIN_MAGIC):
            # Containers are padded to alignment with zeros; skip to the next magic.
            nxt = raw.find(struct.pack("<I", FATBIN_MAGIC), pos + 1)
            if nxt < 0:
                break
            pos = nxt
            continue
        start = pos + header_size
        end = start + fat_size
        if header_size < _CONTAINER.size or end > len(raw):
            raise BadElfError(
                f"{label}: fat binary container at offset {pos} claims {fat_size} bytes, past the section end",
                "the library is truncated or corrupt",
            )
        entry = start
        while entry + _ENTRY.size <= end:
            (kind, _ver, ehdr_size, payload, _compressed, _u, minor, major, sm, _name_off, _name_len,
             flags) = _ENTRY.unpack_from(raw, entry)
            if ehdr_size == 0:
                break
            if kind in (KIND_CUBIN, KIND_CUBIN_ALT, KIND_PTX):
                compression = "zstd" if flags & FLAG_ZSTD else "lz4" if flags & FLAG_LZ4 else None
                entries.append(FatbinEntry("ptx" if kind == KIND_PTX else "cubin", arch_name(sm, flags), compression,
                                           f"{major}.{minor}"))
            entry += ehdr_size + payload
        pos = end
    return entries


def fatbin_entries(elf: ElfFile, section: str = LOADABLE_SECTION) -> list[FatbinEntry]:
    """The cubins and PTX in a host ELF: the loadable ones, or with RELOCATABLE_SECTION the device-link inputs."""
    return [entry for sec in elf.sections if sec.name == section
            for entry in parse_fatbin(elf.section_bytes(sec), f"{elf.label} [{sec.name}]")]


def summarize(entries: list[FatbinEntry]) -> dict:
    """Sorted architecture lists per kind, as `inspect` prints them."""
    archs = {kind: sorted({e.arch for e in entries if e.kind == kind}, key=arch_sort_key) for kind in ("cubin", "ptx")}
    return {**archs, "compressed": sorted({e.compression for e in entries if e.compression}), "entries": len(entries)}


def arch_sort_key(arch: str) -> tuple[int, str]:
    digits = "".join(c for c in arch if c.isdigit())
    return (int(digits or 0), arch)
