"""A wheel's RECORD against its own files.

A wheel lists every file it holds in `<name>.dist-info/RECORD`, each with the
urlsafe-base64 sha256 of its bytes and its size (PEP 376/427, the "binary
distribution format" specification). Installers check these while unpacking;
a file that disagrees means the wheel was changed after it was built, or is
corrupt. Each member is streamed, never unpacked to disk.
"""

from __future__ import annotations

import csv
import hashlib
import io
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from blackwell_stack.errors import StackError
from blackwell_stack.formats import wheelzip
from blackwell_stack.hashes import hex_to_record

# Files a wheel may hold without listing them in RECORD (the RECORD's own signatures).
_UNLISTED_OK = ("RECORD.jws", "RECORD.p7s")


@dataclass
class RecordReport:
    record: str | None  # the RECORD member's name, None when the wheel has none
    checked: int = 0  # members whose hash and size were compared
    mismatched: list[str] = field(default_factory=list)  # "name: what differs"
    missing: list[str] = field(default_factory=list)  # listed, not in the wheel
    unlisted: list[str] = field(default_factory=list)  # in the wheel, not listed

    @property
    def ok(self) -> bool:
        return self.record is not None and not (self.mismatched or self.missing or self.unlisted)

    def problems(self) -> list[str]:
        if self.record is None:
            return ["the wheel has no .dist-info/RECORD"]
        out = list(self.mismatched)
        out += [f"{name}: listed in RECORD but not in the wheel" for name in self.missing]
        out += [f"{name}: in the wheel but not listed in RECORD" for name in self.unlisted]
        return out

    def to_json(self) -> dict:
        # record and ok lead the --json object, then every field (a new field becomes a key)
        return {"record": self.record, "ok": self.ok, **asdict(self)}


def check(path: str | Path, *, known: dict[str, str], progress: Callable[[int], None]) -> RecordReport:
    """Compare every member of the wheel at `path` with its RECORD entry; those in `known` (hex sha256, hashed by
    inspect's workers) are not read again, the others' uncompressed bytes go to `progress` block by block."""
    path = Path(path)
    with wheelzip.open_zip(path) as zf:
        # open_zip has checked that there is a <name>-<version>.dist-info/WHEEL: RECORD is beside it
        info = next(n for n in zf.namelist() if n.endswith(".dist-info/WHEEL") and n.count("/") == 1)
        record_name = f"{info.split('/')[0]}/RECORD"
        try:
            text = wheelzip.read_member(zf, record_name, path).decode("utf-8", errors="replace")
        except KeyError:
            return RecordReport(record=None)
        report = RecordReport(record=record_name)
        listed = parse_record(text, record_name)
        members = {i.filename: i for i in zf.infolist() if not i.is_dir()}
        for name, (algorithm, digest, size) in listed.items():
            member = members.get(name)
            if member is None:
                report.missing.append(name)
                continue
            if name == record_name or algorithm is None:
                continue  # RECORD cannot hash itself
            report.checked += 1
            hashed = known.get(name) if algorithm == "sha256" else None
            problem = _compare(zf, member, algorithm, digest, size, hashed, progress)
            if problem:
                report.mismatched.append(f"{name}: {problem}")
        report.unlisted = sorted(
            name for name in members if name not in listed and name.rsplit("/", 1)[-1] not in _UNLISTED_OK
        )
    return report


def parse_record(text: str, where: str, *, hint: str = "the wheel is malformed",
                 strict: bool = True) -> dict[str, tuple[str | None, str | None, int | None]]:
    """RECORD rows: name -> (hash algorithm, urlsafe-base64 digest, size); (None, None, None) when unhashed.

    The one reader of RECORD files: a wheel's (inspect, stack doctor) and an
    installation's (pins rescue, stack doctor). A malformed row is a StackError naming `where`, its
    line and `hint`; with strict=False it is read as far as it goes (doctor compares what it can).
    """
    rows: dict[str, tuple[str | None, str | None, int | None]] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row or not row[0]:
            continue
        if len(row) != 3 and strict:
            raise StackError(f"{where} line {number}: expected name,hash,size, found {row!r}", hint)
        name, hashed, size = (row + ["", ""])[:3]
        if not hashed:
            rows[name] = (None, None, None)
            continue
        algorithm, _, digest = hashed.partition("=")
        try:
            rows[name] = (algorithm, digest, int(size) if size else None)
        except ValueError:
            if strict:
                raise StackError(f"{where} line {number}: size {size!r} is not a number", hint) from None
            rows[name] = (algorithm, digest, None)
    return rows


def _compare(zf: zipfile.ZipFile, member: zipfile.ZipInfo, algorithm: str, digest: str | None, size: int | None,
             hashed: str | None, progress: Callable[[int], None]) -> str | None:
    """What differs between a member and its RECORD row; `hashed`: its hex digest when already known."""
    if algorithm not in hashlib.algorithms_guaranteed or algorithm in ("md5", "sha1"):
        return f"RECORD hashes it with {algorithm!r}, which is not a secure hash"
    if size is not None and size != member.file_size:
        return f"size {member.file_size}, RECORD says {size}"
    if hashed is None:
        h = hashlib.new(algorithm)
        try:
            with zf.open(member) as fh:
                while block := fh.read(1 << 20):
                    h.update(block)
                    progress(len(block))
        except wheelzip.READ_ERRORS as exc:
            return f"cannot be read ({exc})"
        hashed = h.hexdigest()
    actual = hex_to_record(hashed)
    return None if actual == digest else f"{algorithm} {actual}, RECORD says {digest}"

