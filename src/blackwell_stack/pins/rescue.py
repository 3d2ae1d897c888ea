"""`pins rescue DIST --from-venv VENV`: repack an installed distribution into a wheel.

For the host that still runs a wheel nobody serves any more (the seed
deployment's torch nightly). The installer recorded every file it wrote in
the distribution's RECORD with its sha256 and size; the repack takes exactly
those files, checks each one against RECORD, and refuses, writing nothing, if
any is missing or differs. What it makes is the original wheel's files, not
its bytes: the zip is written anew (sorted, fixed timestamps), so its sha256
is a new pin, not the upstream one.

Left out, because the installer made them and a wheel does not carry them:
INSTALLER, REQUESTED, direct_url.json and other installer records, RECORD
itself (written anew), __pycache__/*.pyc, and console/GUI scripts made from
entry_points.txt. Files installed outside site-packages go back under
<name>-<version>.data/ (scripts, headers, data); a script's `#!` line, which
the installer pointed at the venv's Python, goes back to `#!python`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import posixpath
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from blackwell_stack import inputfiles
from blackwell_stack.errors import HashMismatch, StackError
from blackwell_stack.fileio import atomic_file
from blackwell_stack.formats import wheelzip
from blackwell_stack.formats.installed import Environment
from blackwell_stack.formats.wheelrecord import parse_record
from blackwell_stack.hashes import hex_to_record, sha256_file

# What installers add to a .dist-info; never part of the wheel they installed.
INSTALLER_FILES = frozenset({"INSTALLER", "REQUESTED", "direct_url.json", "RECORD", "uv_cache.json", "uv_build.json"})
# Zip entries get this time (the earliest a zip can hold), so the same files give the same bytes.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_SHEBANG = re.compile(rb"^#![^\n]*python[^\n]*\n")


@dataclass
class Rescue:
    dist: str
    version: str
    wheel: Path
    sha256: str
    files: int
    left_out: list[str] = field(default_factory=list)


def _archive_name(recorded: str, site: Path, prefix: Path, data_dir: str, scripts: set[str]) -> str | None:
    """Where an installed file (its path in RECORD) goes in the wheel; None when the installer made it."""
    if "__pycache__/" in recorded and recorded.endswith(".pyc"):
        return None
    if not wheelzip.climbs(recorded):
        return posixpath.normpath(recorded)
    # An installer's scripts and data climb out of site-packages (../../../bin/x): never out of the venv.
    target = (site / recorded).resolve()
    try:
        rel = target.relative_to(prefix.resolve())
    except ValueError:
        raise StackError(f"RECORD names {recorded}, outside the venv {prefix}",
                         "repack from the venv the distribution was installed into") from None
    parts = rel.parts
    if parts[0] == "bin":
        if parts[1] in scripts:
            return None
        return f"{data_dir}/scripts/{'/'.join(parts[1:])}"
    if parts[0] == "include":
        return f"{data_dir}/headers/{'/'.join(parts[2:] if len(parts) > 2 else parts[1:])}"
    return f"{data_dir}/data/{rel.as_posix()}"


def _wheel_name(dist, dist_info: Path, name: str, version: str) -> str:
    tags = [line.split(":", 1)[1].strip() for line in (dist.read_text("WHEEL") or "").splitlines()
            if line.startswith("Tag:")]
    if not tags:
        raise StackError(f"{dist_info}/WHEEL names no Tag", "a distribution installed from a wheel records its tags there")
    parts = [list(dict.fromkeys(t.split("-")[i] for t in tags)) for i in range(3)]
    stem = re.sub(r"[-_.]+", "_", name)
    return f"{stem}-{version}-{'-'.join('.'.join(p) for p in parts)}.whl"


def rescue(dist_name: str, venv: str | Path, out_dir: str | Path = ".") -> Rescue:
    """Check every recorded file of DIST in VENV, then write the wheel; refuse on any difference, writing nothing."""
    python = _python_of(Path(venv))
    env = Environment(str(python))
    dist = env.get(dist_name)
    if dist is None:
        raise StackError(f"{dist_name} is not installed in {venv}",
                         f"pass the name of an installed distribution ({len(env.dists)} are installed there)")
    name, version = dist.metadata["Name"], dist.version
    site = Path(str(dist.locate_file("")))
    dist_info = Path(str(getattr(dist, "_path", "")))
    record = dist_info / "RECORD"
    if not record.is_file():
        raise StackError(f"{name} {version} in {venv} has no RECORD", "only a distribution installed from a wheel can be repacked")
    entries = parse_record(inputfiles.read_text(record, limit=inputfiles.TEXT_FILE_LIMIT), str(record),
                           hint="the installation's RECORD is damaged: reinstall the distribution to repack it")
    prefix = Path(venv) if (Path(venv) / "pyvenv.cfg").is_file() else python.parent.parent
    data_dir = f"{dist_info.name.removesuffix('.dist-info')}.data"
    # The scripts an installer makes from entry_points.txt.
    scripts = {ep.name for ep in dist.entry_points if ep.group in ("console_scripts", "gui_scripts")}

    members: dict[str, tuple[Path, str, int]] = {}  # archive name -> (installed file, its sha256 in RECORD, mode)
    left_out, missing, differing, unchecked = [], [], [], []
    for recorded, (algorithm, digest, size) in entries.items():
        if algorithm not in (None, "sha256"):
            raise StackError(f"{record}: {recorded} is recorded with {algorithm}, not sha256",
                             "only sha256 RECORDs can be checked")
        installer_file = recorded.startswith(dist_info.name + "/") and recorded.rsplit("/", 1)[-1] in INSTALLER_FILES
        arcname = None if installer_file else _archive_name(recorded, site, prefix, data_dir, scripts)
        if arcname is None:
            left_out.append(recorded)
            continue
        path = site / recorded
        if not path.is_file():
            missing.append(recorded)
        elif not digest:
            unchecked.append(recorded)
        elif hex_to_record(sha256_file(path)) != digest or size not in (None, path.stat().st_size):
            differing.append(recorded)
        else:
            members[arcname] = (path, digest, 0o100755 if os.access(path, os.X_OK) else 0o100644)
    if missing or differing or unchecked:
        lines = ([f"missing: {p}" for p in missing] + [f"differs from RECORD: {p}" for p in differing]
                 + [f"no hash in RECORD: {p}" for p in unchecked])
        shown = "\n  ".join(lines[:20]) + (f"\n  ... and {len(lines) - 20} more" if len(lines) > 20 else "")
        error = HashMismatch if differing else StackError
        raise error(f"{name} {version} in {venv} is not as installed, so it cannot be repacked; nothing was written:\n  {shown}",
                    "reinstall it from the original wheel if you have one; a changed installation is not the pinned build")

    wheel = Path(out_dir) / _wheel_name(dist, dist_info, name, version)
    record_name = f"{dist_info.name}/RECORD"
    record_rows = []
    ordered = sorted(members, key=lambda a: (a.startswith(dist_info.name + "/"), a))
    with atomic_file(wheel, suffix=".part") as fh:
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            for arc in ordered:
                path, digest, mode = members[arc]
                info = _zip_info(arc, mode)
                if arc.startswith(f"{data_dir}/scripts/"):
                    data = _SHEBANG.sub(b"#!python\n", path.read_bytes(), count=1)
                    zf.writestr(info, data)
                    record_rows.append([arc, f"sha256={hex_to_record(hashlib.sha256(data).hexdigest())}", str(len(data))])
                    continue
                # Hashed again while written: a file changed since the check fails the repack (nothing is left).
                h = hashlib.sha256()
                with open(path, "rb") as src, zf.open(info, "w", force_zip64=True) as dst:
                    while block := src.read(1 << 20):
                        h.update(block)
                        dst.write(block)
                if hex_to_record(h.hexdigest()) != digest:
                    raise HashMismatch(f"{path} changed while it was repacked; nothing was written",
                                       "stop what writes to the venv and run the same command again")
                record_rows.append([arc, f"sha256={digest}", str(path.stat().st_size)])
            record_rows.append([record_name, "", ""])
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerows(record_rows)
            zf.writestr(_zip_info(record_name, 0o100644), buf.getvalue().encode())
    return Rescue(name, version, wheel, sha256_file(wheel), len(members), left_out)


def _zip_info(name: str, mode: int) -> zipfile.ZipInfo:
    """A member at ZIP_TIME, deflated, with the file's mode."""
    info = zipfile.ZipInfo(name, ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = mode << 16
    return info


def _python_of(venv: Path) -> Path:
    """The interpreter of a venv (or the interpreter itself, when given one)."""
    if venv.is_file():
        return venv
    for candidate in (venv / "bin" / "python3", venv / "bin" / "python"):
        if candidate.exists():
            return candidate
    raise StackError(f"{venv} is not a venv (no bin/python3)", "pass the venv's directory or its bin/python")
