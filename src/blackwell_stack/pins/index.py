"""Read a package index's project page: PEP 691 JSON, or PEP 503 HTML.

Used for PyTorch's nightly index (HTML; its links carry no #sha256 fragment,
pytorch/test-infra PR 6307) and any PEP 503/691 mirror a user points at with
--index-url.
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from html.parser import HTMLParser

from packaging.utils import canonicalize_name

from blackwell_stack.download import read_url
from blackwell_stack.errors import NetworkError, StackError

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
HTML_TYPE = "application/vnd.pypi.simple.v1+html"
# PyTorch's nightly torch page (every build, every platform) is well under this.
PAGE_LIMIT = 64 << 20


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None  # from the index, when it publishes one


def project_url(index_url: str, package: str) -> str:
    return f"{index_url.rstrip('/')}/{canonicalize_name(package)}/"


def list_files(index_url: str, package: str) -> list[IndexFile]:
    url = project_url(index_url, package)
    try:
        body, content_type, final_url = read_url(
            url, limit=PAGE_LIMIT, what="the project page",
            headers={"Accept": f"{JSON_TYPE}, {HTML_TYPE};q=0.5, text/html;q=0.1"})
    except NetworkError as exc:
        raise NetworkError(
            f"cannot read the index page of {package}: {exc.message}",
            "check the network, or point at another PEP 503/691 index with --index-url",
        ) from exc
    if JSON_TYPE in content_type or body.lstrip().startswith(b"{"):
        return _parse_json(body, final_url)
    return _parse_html(body.decode("utf-8", errors="replace"), final_url)


def _split_fragment(url: str) -> tuple[str, str | None]:
    base, _, fragment = url.partition("#")
    sha = None
    if fragment.startswith("sha256="):
        sha = fragment[len("sha256=") :].lower()
    return base, sha


def _parse_json(body: bytes, page_url: str) -> list[IndexFile]:
    not_page = StackError(f"{page_url}: not a PEP 691 project page", "check --index-url")
    try:
        files = json.loads(body)["files"]
        out = []
        for f in files:
            url = urllib.parse.urljoin(page_url, f["url"])
            base, frag_sha = _split_fragment(url)
            sha = (f.get("hashes") or {}).get("sha256") or frag_sha
            out.append(IndexFile(f["filename"], base, sha))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise not_page from None
    return out


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def _parse_html(text: str, page_url: str) -> list[IndexFile]:
    parser = _Links()
    parser.feed(text)
    out = []
    for href, label in parser.links:
        url = urllib.parse.urljoin(page_url, href)
        base, sha = _split_fragment(url)
        filename = label or urllib.parse.unquote(base.rsplit("/", 1)[-1])
        out.append(IndexFile(urllib.parse.unquote(filename), base, sha))
    return out
