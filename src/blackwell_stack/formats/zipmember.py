"""One zip member read whole: within a bound, and every way it can fail a StackError that names the archive.

What a member says it holds is checked first, and what it really inflates to is read only to one byte past the
bound: a 3 MB wheel can inflate to 3 GiB. An encrypted member, an unknown compression method, a bad CRC and a
truncated stream all say which archive and member, and what to do.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

from blackwell_stack.errors import StackError

# The largest member the project reads whole (a METADATA, a RECORD, SGLang's server_args.py) is under 2 MiB.
MEMBER_LIMIT = 64 << 20

# What zipfile raises for a member it cannot give back: a damaged or cut-short stream, an encrypted member
# (RuntimeError), a compression method it does not know (NotImplementedError).
READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError, OSError)


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
