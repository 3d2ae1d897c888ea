"""`wheel diff A B`: are two builds identical, and if not, exactly how do they differ?

First the sha256 of both files. If they differ, member by member, each
difference falls in one class, from harmless to real:

  zip-metadata  same bytes; only timestamps, permissions, compression or order
  record        .dist-info/RECORD (follows from the other differences)
  build-id      ELF files equal except for the GNU build ID note
  build-paths   ELF files whose loaded code and data are equal, or differ only
                in strings that are file paths (debug info, __FILE__)
  content       real differences in code or data
  only-in-a / only-in-b

Bit-for-bit reproducible builds give "identical"; anything but "content"
and only-in-* points at the build environment, not at the code.
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from collections import Counter
from pathlib import Path

from blackwell_stack import inputfiles
from blackwell_stack.formats import elf, wheelzip
from blackwell_stack.hashes import sha256_file
from blackwell_stack.progress import Progress

CLASSES = ("zip-metadata", "record", "build-id", "build-paths", "content", "only-in-a", "only-in-b")
SHF_ALLOC = 0x2
_PATHLIKE = re.compile(rb"^[\x20-\x7e]*/[\x20-\x7e]*$")
_TIMESTAMP = "{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}"


def member_digest(zf: zipfile.ZipFile, info: zipfile.ZipInfo, archive: Path) -> str:
    """sha256 of one member, read in blocks; a clear error for a member that cannot be read."""
    h = hashlib.sha256()
    try:
        with zf.open(info) as fh:
            while block := fh.read(1 << 20):
                h.update(block)
    except wheelzip.READ_ERRORS as exc:
        raise wheelzip.member_error(archive, info.filename, exc) from None
    return h.hexdigest()


def _metadata_differences(a: zipfile.ZipInfo, b: zipfile.ZipInfo) -> list[str]:
    out = []
    if a.date_time != b.date_time:
        out.append(f"timestamp {_TIMESTAMP.format(*a.date_time)} -> {_TIMESTAMP.format(*b.date_time)}")
    if a.external_attr != b.external_attr:
        out.append(f"permissions {oct(a.external_attr >> 16)} -> {oct(b.external_attr >> 16)}")
    if a.compress_type != b.compress_type:
        out.append(f"compression {a.compress_type} -> {b.compress_type}")
    if a.extra != b.extra:
        out.append("zip extra fields")
    if a.compress_size != b.compress_size and a.compress_type == b.compress_type:
        out.append("compression level")
    return out


def _record_differences(text_a: str, text_b: str) -> str:
    rows_a, rows_b = ({ln.split(",")[0]: ln for ln in text.splitlines() if ln} for text in (text_a, text_b))
    changed = sorted(k for k in rows_a.keys() & rows_b.keys() if rows_a[k] != rows_b[k])
    added, removed = len(rows_b.keys() - rows_a.keys()), len(rows_a.keys() - rows_b.keys())
    parts = [f"{len(changed)} entries changed ({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''})"
             if changed else "", f"{added} added" if added else "", f"{removed} removed" if removed else ""]
    return "; ".join(filter(None, parts)) or "line order only"


def classify_elf(ea: elf.ElfFile, eb: elf.ElfFile) -> tuple[str, str]:
    """(class, detail) for two ELF files with different bytes."""
    loaded_a, loaded_b = ([s for s in e.sections if s.flags & SHF_ALLOC and s.name != ".note.gnu.build-id"]
                          for e in (ea, eb))
    if [s.name for s in loaded_a] != [s.name for s in loaded_b]:
        return "content", "different section layout"
    differing, paths = [], []
    for sa, sb in zip(loaded_a, loaded_b):
        ra, rb = bytes(ea.section_bytes(sa)), bytes(eb.section_bytes(sb))
        if ra == rb:
            continue
        found = _path_only_difference(ra, rb)
        if found is None:
            return "content", f"section {sa.name} differs"
        differing.append(sa.name)
        paths.extend(found)
    if differing:
        shown = ", ".join(sorted({p.decode(errors='replace') for p in paths})[:3])
        return "build-paths", f"only embedded paths differ in {', '.join(differing)} (e.g. {shown})"
    secs_b = {s.name: s for s in eb.sections}
    other = [
        s.name for s in ea.sections
        if not s.flags & SHF_ALLOC and s.name in secs_b
        and bytes(ea.section_bytes(s)) != bytes(eb.section_bytes(secs_b[s.name]))
    ]
    if other:
        return "build-paths", f"code and data equal; non-loaded sections differ: {', '.join(other[:5])}"
    if ea.build_id != eb.build_id:
        return "build-id", f"build ID {ea.build_id} -> {eb.build_id}"
    return "build-paths", "code and data equal; headers differ"


def _path_only_difference(a: bytes, b: bytes) -> list[bytes] | None:
    """The differing strings when every difference between equal-size a and b is inside a path string."""
    if len(a) != len(b):
        return None
    out = []
    i, n = 0, len(a)
    while i < n:
        if a[i] == b[i]:
            i += 1
            continue
        start = max(a.rfind(b"\0", 0, i), b.rfind(b"\0", 0, i)) + 1
        end_a, end_b = a.find(b"\0", i), b.find(b"\0", i)
        end = max(end_a if end_a >= 0 else n, end_b if end_b >= 0 else n)
        sa, sb = a[start:end], b[start:end]
        if not (_PATHLIKE.match(sa.split(b"\0")[0] or b"") and _PATHLIKE.match(sb.split(b"\0")[0] or b"")):
            return None
        out.append(sa.split(b"\0")[0])
        i = end + 1
    return out


def diff(path_a: str | Path, path_b: str | Path) -> dict:
    path_a, path_b = (inputfiles.regular_file(p, hint="pass two wheel files") for p in (path_a, path_b))
    with Progress("hashing both wheels", path_a.stat().st_size + path_b.stat().st_size) as bar:
        sha_a, sha_b = sha256_file(path_a, progress=bar.advance), sha256_file(path_b, progress=bar.advance)
    result = {"a": str(path_a), "b": str(path_b), "sha256_a": sha_a, "sha256_b": sha_b}
    if sha_a == sha_b:
        return {**result, "identical": True, "verdict": "identical", "members": [], "classes": {}}
    with wheelzip.open_zip(path_a) as za, wheelzip.open_zip(path_b) as zb:
        infos_a = {i.filename: i for i in za.infolist()}
        infos_b = {i.filename: i for i in zb.infolist()}
        members: list[dict] = []
        for cls, mine, theirs in (("only-in-a", infos_a, infos_b), ("only-in-b", infos_b, infos_a)):
            members += [{"name": name, "class": cls, "detail": f"{mine[name].file_size} bytes"}
                        for name in sorted(mine.keys() - theirs.keys())]
        common = sorted(infos_a.keys() & infos_b.keys())
        with Progress(f"comparing {len(common)} members", sum(infos_a[n].file_size for n in common)) as bar:
            for name in common:
                difference = _compare_member(za, zb, infos_a[name], infos_b[name], path_a, path_b)
                if difference:
                    members.append({"name": name, "class": difference[0], "detail": difference[1]})
                bar.advance(infos_a[name].file_size)
        order_a = [n for n in za.namelist() if n in infos_b]
        order_b = [n for n in zb.namelist() if n in infos_a]
        if order_a != order_b:
            members.append({"name": "(archive)", "class": "zip-metadata", "detail": "members stored in another order"})
    if not members:
        members.append({"name": "(archive)", "class": "zip-metadata", "detail": "zip headers or comment differ"})
    classes = dict(Counter(m["class"] for m in members))
    verdict = max(classes, key=CLASSES.index)
    return {**result, "identical": False, "verdict": verdict, "members": members, "classes": classes}


def _compare_member(za, zb, ia: zipfile.ZipInfo, ib: zipfile.ZipInfo, pa: Path, pb: Path) -> tuple[str, str] | None:
    if ia.CRC == ib.CRC and ia.file_size == ib.file_size and member_digest(za, ia, pa) == member_digest(zb, ib, pb):
        meta = _metadata_differences(ia, ib)
        return ("zip-metadata", "; ".join(meta)) if meta else None
    if ia.filename.endswith(".dist-info/RECORD"):
        return "record", _record_differences(za.read(ia).decode(errors="replace"), zb.read(ib).decode(errors="replace"))
    with za.open(ia) as fa, zb.open(ib) as fb:
        heads = fa.read(4), fb.read(4)
    if all(elf.is_elf(h) for h in heads):
        with wheelzip.open_member_elf("wheel", pa, ia.filename) as ea, wheelzip.open_member_elf("wheel", pb, ib.filename) as eb:
            return classify_elf(ea, eb)
    return "content", f"{ia.file_size} -> {ib.file_size} bytes"
