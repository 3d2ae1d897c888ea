"""PyPI's JSON API: release files with their registry sha256, cached downloads."""

from __future__ import annotations

import fnmatch
import json
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from blackwell_stack.download import download, open_url
from blackwell_stack.errors import NetworkError, StackError
from blackwell_stack.hashes import sha256_file
from blackwell_stack.paths import cache_dir

PYPI_JSON = "https://pypi.org/pypi"


@dataclass(frozen=True)
class ReleaseFile:
    name: str
    version: str
    filename: str
    url: str
    sha256: str
    size: int
    packagetype: str


def release_files(name: str, version: str, *, index_json: str = PYPI_JSON) -> list[ReleaseFile]:
    """The files of name==version with PyPI's sha256 digests.

    Reads the project document (`/pypi/<name>/json`, its `releases` table):
    some PyPI mirrors serve only that, not the per-version document.
    """
    url = f"{index_json.rstrip('/')}/{name}/json"
    try:
        with open_url(url) as resp:
            data = json.load(resp)
    except NetworkError as exc:
        raise NetworkError(
            f"cannot read {name}=={version} from PyPI: {exc.message}",
            "check the name, or pass another index with --index-url",
        ) from exc
    files = (data.get("releases") or {}).get(version)
    if not files:
        known = list(data.get("releases") or {})[-5:]
        raise NetworkError(
            f"cannot read {name}=={version} from PyPI: no such release (latest listed: {', '.join(known)})",
            "check the version",
        )
    return [
        ReleaseFile(name, version, f["filename"], file_url(url, f["url"]), f["digests"]["sha256"], f["size"], f["packagetype"])
        for f in files
        if not f.get("yanked")
    ]


FILES_HOST = "https://files.pythonhosted.org/packages/"
# Mirrors of pypi.org (bandersnatch-style) answer with URLs relative to the
# JSON document, e.g. ../../packages/packages/97/b4/<digest>/<file>, under
# which sits PyPI's own /packages/<hash path>. Pins record PyPI's canonical
# file URL, so they hold on every machine; the sha256 check is the same.
_MIRROR_PREFIX = "/packages/packages/"


def file_url(document_url: str, url: str) -> str:
    resolved = urllib.parse.urljoin(document_url, url)
    path = urllib.parse.urlsplit(resolved).path
    if path.startswith(_MIRROR_PREFIX):
        return FILES_HOST + path[len(_MIRROR_PREFIX):]
    return resolved


def pick(files: list[ReleaseFile], pattern: str) -> ReleaseFile:
    matches = [f for f in files if fnmatch.fnmatch(f.filename, pattern)]
    if len(matches) != 1:
        names = ", ".join(f.filename for f in files)
        raise StackError(f"{len(matches)} files match {pattern!r}; the release has: {names}")
    return matches[0]


def fetch(name: str, version: str, pattern: str = "*.whl") -> Path:
    """The release file matching pattern, from the user cache or PyPI, verified by PyPI's sha256."""
    f = pick(release_files(name, version), pattern)
    dest = cache_dir("pypi", name.lower(), version) / f.filename
    if dest.exists() and dest.stat().st_size == f.size and sha256_file(dest) == f.sha256:
        return dest
    download(f.url, dest, expected_sha256=f.sha256)
    return dest
