"""PyPI's JSON API: release files with their registry sha256."""

from __future__ import annotations

import fnmatch
import json
import urllib.parse
from dataclasses import dataclass

from blackwell_stack.download import read_url
from blackwell_stack.errors import NetworkError, StackError

PYPI_JSON = "https://pypi.org/pypi"
# torch's project document, the largest this project reads, is a few MiB.
DOCUMENT_LIMIT = 64 << 20


@dataclass(frozen=True)
class ReleaseFile:
    name: str
    version: str
    filename: str
    url: str
    sha256: str
    size: int
    packagetype: str


def release_files(name: str, version: str) -> list[ReleaseFile]:
    """The files of name==version with PyPI's sha256 digests, from the project document's `releases` table."""
    url = f"{PYPI_JSON}/{name}/json"
    try:
        body, _ = read_url(url, limit=DOCUMENT_LIMIT, what="the project's JSON document")
    except NetworkError as exc:
        raise NetworkError(
            f"cannot read {name}=={version} from PyPI: {exc.message}",
            "check the name and the network",
        ) from exc
    not_api = StackError(f"{url} is not a PyPI JSON API document", "check the network: something else answered for PyPI")
    try:
        data = json.loads(body)
    except ValueError:
        raise not_api from None
    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, dict):
        raise not_api
    files = releases.get(version)
    if not files:
        raise NetworkError(
            f"cannot read {name}=={version} from PyPI: no such release (latest listed: {', '.join(list(releases)[-5:])})",
            "check the version",
        )
    try:
        return [ReleaseFile(name, version, f["filename"], file_url(url, f["url"]), f["digests"]["sha256"], f["size"],
                            f["packagetype"]) for f in files if not f.get("yanked")]
    except (KeyError, TypeError, AttributeError):
        raise not_api from None


FILES_HOST = "https://files.pythonhosted.org/packages/"
# Mirrors of pypi.org (bandersnatch-style) answer with URLs relative to the
# JSON document, e.g. ../../packages/packages/97/b4/<digest>/<file>, under
# which sits PyPI's own /packages/<hash path>. PyPI's canonical file URL holds
# on every machine; the sha256 check is the same.
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
