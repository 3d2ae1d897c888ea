"""Read single members of a remote wheel with HTTP range requests.

A torch wheel is ~900 MB; `doctor abi` needs only the dynamic symbol tables
of a few libraries in it. zipfile works on any seekable file, so this module
gives it one whose reads become `Range:` requests: the end of the file (the
zip's central directory, ~100 KB) and then only the compressed bytes of the
members asked for. Extracted members are cached under
`cache_dir("remote-zip", <wheel sha256>)`, keyed by the wheel's registry
sha256 and the member name, and checked by the zip's CRC-32 on the way in.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from blackwell_stack import pypi
from blackwell_stack.download import open_url
from blackwell_stack.errors import NetworkError, StackError
from blackwell_stack.fileio import atomic_file
from blackwell_stack.paths import cache_dir
from blackwell_stack.progress import Progress


@dataclass(frozen=True)
class RemoteFile:
    filename: str
    url: str
    sha256: str
    size: int


def pypi_file(name: str, version: str, pattern: str) -> RemoteFile:
    """The one file of name==version whose filename matches pattern, with PyPI's sha256 (its URL absolute:
    pypi.release_files resolves a mirror's relative ones)."""
    f = pypi.pick(pypi.release_files(name, version), pattern)
    return RemoteFile(f.filename, f.url, f.sha256, f.size)


class HttpRangeFile(io.RawIOBase):
    """A read-only, seekable file over HTTP range requests.

    A sequential read continues one open response; a seek elsewhere opens a
    new `Range: bytes=N-` request. zipfile reads the central directory with a
    few seeks, then each member front to back.
    """

    def __init__(self, url: str, size: int):
        super().__init__()
        self.url = url
        self.size = size
        self._pos = 0
        self._resp = None
        self._resp_pos = -1

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buf) -> int:
        if self._pos >= self.size or len(buf) == 0:
            return 0
        if self._resp is None or self._resp_pos != self._pos:
            if self._resp is not None:
                self._resp.close()
            resp = open_url(self.url, headers={"Range": f"bytes={self._pos}-"})
            if resp.status != 206:
                resp.close()
                raise NetworkError(f"{self.url} does not serve byte ranges (HTTP {resp.status})",
                                   "download the whole wheel and pass its path instead")
            self._resp = resp
        assert self._resp is not None  # for mypy: set just above
        n = self._resp.readinto(buf)
        if not n:
            raise NetworkError(f"{self.url}: the server closed the connection at byte {self._pos} of {self.size}")
        self._pos += n
        self._resp_pos = self._pos
        return n

    def close(self) -> None:
        if self._resp is not None:
            self._resp.close()
            self._resp = None
        super().close()


class RemoteWheel:
    """A wheel on a server: its member list, and members fetched one at a time into the cache."""

    def __init__(self, remote: RemoteFile):
        self.remote = remote
        self.label = remote.filename
        self._raw = HttpRangeFile(remote.url, remote.size)
        try:
            self._zip = zipfile.ZipFile(io.BufferedReader(self._raw, buffer_size=1 << 16))
        except zipfile.BadZipFile as exc:
            raise StackError(f"{remote.url} is not a readable zip archive ({exc})") from None
        self.infos = {i.filename: i for i in self._zip.infolist() if not i.is_dir()}
        self.names = list(self.infos)

    def close(self) -> None:
        self._zip.close()
        self._raw.close()

    def __enter__(self) -> RemoteWheel:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def fetch_member(self, name: str) -> Path:
        """The member's path in the cache, fetched by range requests if not there yet."""
        info = self.infos.get(name)
        if info is None:
            raise StackError(f"{self.label} has no member {name}")
        dest = cache_dir("remote-zip", self.remote.sha256).joinpath(*name.split("/"))
        if dest.is_file() and dest.stat().st_size == info.file_size:
            return dest
        try:
            # Written beside dest and renamed into place only when whole (the same writer as every other file).
            with atomic_file(dest, suffix=".part") as out, self._zip.open(info) as src:
                with Progress(f"{name} from {self.label}", info.file_size) as bar:
                    while block := src.read(4 << 20):
                        out.write(block)
                        bar.advance(len(block))
                # ZipExtFile has checked the CRC-32 at the end of the member.
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
            raise StackError(f"{self.label}: member {name} is corrupt ({exc})", "try again later") from None
        return dest
