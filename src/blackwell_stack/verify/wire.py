"""The bytes an OpenAI-compatible server sends back: HTTP/1.1 chunked bodies and Server-Sent Events.

Nothing a server sends is trusted to be small: an answer's size is capped
from the request's own max_tokens (`Limits`), both the whole body and each
SSE event, and anything that is not the wire format is a ProtocolError.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

# Answers that name no max_tokens (/v1/models): at most this much.
DEFAULT_BODY_LIMIT = 8 << 20


@dataclass(frozen=True)
class Limits:
    """The largest answer a request may get.

    One SSE event carries at most the whole answer: max_tokens tokens, each
    well under 256 bytes even as escaped JSON with its metadata, plus 64 KiB.
    The whole body is at most max_tokens events of 8 KiB (text, logprobs,
    token ids) plus 1 MiB for everything else. Generous for a healthy server,
    and bounded: a 200 MB line is refused after its first MiB.
    """

    event_bytes: int
    body_bytes: int

    @classmethod
    def for_request(cls, body: dict | None) -> Limits:
        max_tokens = body.get("max_tokens") if isinstance(body, dict) else None
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            return cls(DEFAULT_BODY_LIMIT, DEFAULT_BODY_LIMIT)
        return cls(event_bytes=(64 << 10) + 256 * max_tokens, body_bytes=(1 << 20) + (8 << 10) * max_tokens)


class ProtocolError(Exception):
    """The server answered, but not in the OpenAI wire format (bad status line, bad JSON, bad SSE)."""


class ConnectionDropped(ProtocolError):
    """The server closed the connection before its answer ended (a crash, a restart, a proxy's timeout):
    a body cut short of its length or its last chunk, or a stream that ends without `data: [DONE]`."""


_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")


class ChunkedDecoder:
    """Incremental decoder of HTTP/1.1 chunked transfer encoding."""

    def __init__(self) -> None:
        self._buf = b""
        self._remaining = 0  # payload bytes left in the current chunk
        self._skip_crlf = False
        self.done = False

    def feed(self, data: bytes) -> bytes:
        buf = self._buf + data if self._buf else data
        out = []
        pos = 0
        n = len(buf)
        while pos < n and not self.done:
            if self._remaining:
                take = min(self._remaining, n - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._skip_crlf = True
                continue
            if self._skip_crlf:
                if n - pos < 2:
                    break
                pos += 2
                self._skip_crlf = False
                continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size_text = buf[pos:eol].split(b";", 1)[0].strip()
            # 1*HEXDIG (RFC 9112 7.1): int(, 16) alone takes "-6", which would never end the chunk.
            if not _CHUNK_SIZE.fullmatch(size_text):
                raise ProtocolError(f"bad chunk size line {buf[pos:eol][:40]!r}")
            size = int(size_text, 16)
            pos = eol + 2
            if size == 0:
                self.done = True
                break
            self._remaining = size
        self._buf = buf[pos:] if not self.done else b""
        return b"".join(out)


class SSEParser:
    """Splits an SSE byte stream into the JSON objects of its `data:` fields.

    feed() returns the events of the blocks completed so far; `done` turns
    true at `data: [DONE]`. Usually a read holds whole events and nothing is
    kept; the tail of an event that spans reads waits in one bytearray that
    is extended (not rebuilt) on each read, and only the new bytes are
    searched for the blank line that ends it. An event longer than
    max_event_bytes is a ProtocolError.
    """

    def __init__(self, max_event_bytes: int = DEFAULT_BODY_LIMIT) -> None:
        self._buf = bytearray()
        self._scan = 0  # where the search for the next blank line resumes in _buf
        self._cr = False  # the previous read ended with \r (a \r\n may straddle two reads)
        self.max_event_bytes = max_event_bytes
        self.done = False

    def feed(self, data: bytes) -> list[dict]:
        if self._cr and data[:1] == b"\n":
            data = data[1:]
        self._cr = data[-1:] == b"\r"
        if b"\r" in data:  # SSE lines may end in \r\n or a lone \r
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        text: bytes | bytearray
        if self._buf:
            self._buf += data
            text, pos, scan = self._buf, 0, self._scan
        else:
            text, pos, scan = data, 0, 0
        events: list[dict] = []
        while True:
            end = text.find(b"\n\n", max(scan, pos))
            if end < 0:
                break
            self._block(text, pos, end, events)
            pos = end + 2
        if text is self._buf:
            del self._buf[:pos]
        elif pos < len(text):
            self._buf += text[pos:]
        if len(self._buf) > self.max_event_bytes:
            raise ProtocolError(
                f"an SSE event is longer than {self.max_event_bytes} bytes (more than max_tokens can explain)"
            )
        self._scan = max(len(self._buf) - 1, 0)
        return events

    def _block(self, text: bytes | bytearray, start: int, end: int, events: list[dict]) -> None:
        if start == end:
            return
        if text.startswith(b"data: ", start) and text.find(b"\n", start, end) < 0:
            payload = bytes(text[start + 6 : end])  # the common case: one data line
        else:
            payload = b"\n".join(
                line[5:].lstrip(b" ") for line in bytes(text[start:end]).split(b"\n") if line.startswith(b"data:")
            )
            if not payload:
                return  # comments (": ping") and event/id/retry fields only
        if payload == b"[DONE]":
            self.done = True
            return
        events.append(json_object(payload, "SSE data"))


def json_object(payload: str | bytes, what: str) -> dict:
    """payload parsed as a JSON object, or a ProtocolError that quotes its start."""
    try:
        data = json.loads(payload)
    except ValueError:
        raise ProtocolError(f"{what} is not JSON: {payload[:120]!r}") from None
    if not isinstance(data, dict):
        raise ProtocolError(f"{what} is not a JSON object: {payload[:120]!r}")
    return data
