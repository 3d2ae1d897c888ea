"""Downloads with a progress bar, a sha256 check, and no partial files left behind."""

from __future__ import annotations

import hashlib
import http.client
import urllib.error
import urllib.parse
import urllib.request
from email.message import Message
from pathlib import Path

from blackwell_stack import parallel
from blackwell_stack.errors import HashMismatch, NetworkError
from blackwell_stack.fileio import atomic_file
from blackwell_stack.progress import Progress, human_size

USER_AGENT = "blackwell-stack/0.1"


def open_url(url: str, *, timeout: float = 60, headers: dict[str, str] | None = None):
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})
    try:
        return urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as exc:
        raise NetworkError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise NetworkError(f"cannot reach {url}: {reason}") from exc


def read_url(url: str, *, limit: int, what: str, headers: dict[str, str] | None = None) -> tuple[bytes, Message]:
    """The body of a small document (a JSON API answer) and the answer's headers (a Link to its next page).

    At most `limit` bytes are read: a body that is longer is a NetworkError
    naming `what`, not a process that grows until the machine runs out of memory.
    """
    with open_url(url, headers=headers) as resp:
        try:
            body = resp.read(limit + 1)
        except (OSError, http.client.HTTPException) as exc:
            raise NetworkError(f"cannot read {url}: {exc}") from exc
    if len(body) > limit:
        raise NetworkError(f"{url}: {what} is longer than {limit >> 20} MiB, more than any such document",
                           "check the URL: it does not serve what was asked for")
    return body, resp.headers


def download(url: str, dest: str | Path, *, expected_sha256: str | None = None, expected_size: int | None = None,
             label: str | None = None) -> str:
    """Download url to dest; return its sha256 hex digest.

    The file appears at dest only when complete and, if expected_sha256 (or
    expected_size: what the index or lock says of the file) is given, only
    when it matches; otherwise nothing is written. A body shorter or longer
    than the Content-Length the server announced is refused too: urllib
    returns a cut-off body as if it were whole. On a terminal a progress bar
    shows; elsewhere one line says what is downloaded, and how much.
    """
    dest = Path(dest)
    h = hashlib.sha256()
    with atomic_file(dest, suffix=".part") as out, open_url(url) as resp:
        announced = content_length(resp.headers.get("Content-Length"))
        size = announced if announced is not None else expected_size
        host = urllib.parse.urlsplit(url).netloc or url
        line = f"downloading {label or dest.name}" + (f" ({human_size(size)})" if size else "") + f" from {host}"
        received = 0
        with Progress(label or dest.name, size, line=line) as bar:
            while block := resp.read(1 << 20):
                parallel.check()  # an interrupted audit's downloads stop here
                out.write(block)
                h.update(block)
                received += len(block)
                bar.advance(len(block))
        if announced is not None and received != announced:
            raise NetworkError(f"{url}: the server announced {announced} bytes and sent {received}",
                               "the download was cut short or the server is broken; nothing was written. Run it "
                               "again, or check the index that serves it")
        if expected_size is not None and received != expected_size:
            raise HashMismatch(f"{url}: {received} bytes, but the index or lock says {expected_size}",
                               "this is not the file that was pinned; nothing was written. Check the index that "
                               "serves it")
        digest = h.hexdigest()
        if expected_sha256 and digest != expected_sha256:
            raise HashMismatch(
                f"{url}: sha256 is {digest}, but the pin says {expected_sha256}",
                "the upstream file changed or the download is corrupt; nothing was written. "
                "Check the source, then re-pin it on purpose if the change is expected",
            )
    return digest


def content_length(value: str | None) -> int | None:
    """A Content-Length a peer sent, when it is one: ASCII digits only (str.isdigit() also passes '¹²', which
    int() refuses, and int() alone passes '-6' and ' 6'); None otherwise."""
    if value and len(value) <= 20 and value.isascii() and value.isdigit():
        return int(value)
    return None
