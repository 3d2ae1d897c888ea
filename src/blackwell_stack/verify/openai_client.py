"""A small asyncio client for OpenAI-compatible servers (SGLang, vLLM, transformers serve).

Standard library only, so that it runs wherever the CLI runs, and lean enough
that one core consumes far more streamed tokens per second than a server of
this size produces (benchmarks/bench-client/ measures it). Each request opens
its own connection: a benchmark then measures what a fresh client sees, and
no connection pool state leaks between concurrency levels.

Streaming responses arrive as Server-Sent Events inside an HTTP/1.1 body that
is chunk-encoded (uvicorn, used by SGLang, vLLM and transformers serve) or
delimited by the connection closing. Every read is stamped once with
time.perf_counter(); all events decoded from that read share the stamp.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from blackwell_stack.errors import StackError

_READ_SIZE = 1 << 18


class ProtocolError(Exception):
    """The server answered, but not in the OpenAI wire format (bad status line, bad JSON, bad SSE)."""


class HTTPStatusError(Exception):
    """The server answered with a non-2xx status."""

    def __init__(self, status: int, body: str):
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status
        self.body = body


@dataclass(frozen=True)
class Endpoint:
    """Where the API lives: scheme, host, port and the /v1 prefix."""

    scheme: str
    host: str
    port: int
    prefix: str  # "/v1", without a trailing slash
    api_key: str | None = None

    @classmethod
    def parse(cls, url: str, api_key: str | None = None) -> "Endpoint":
        """http://host:port, http://host:port/v1 or https://host/prefix/v1 -> Endpoint."""
        raw = url if "://" in url else f"http://{url}"
        parts = urlsplit(raw)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise StackError(
                f"not a server URL: {url!r}",
                "give the server's base URL, for example http://127.0.0.1:30000 (the /v1 prefix is optional)",
            )
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise StackError(f"bad port in {url!r}: {exc}", "use a port number between 1 and 65535") from None
        prefix = parts.path.rstrip("/")
        if not prefix.endswith("/v1"):
            prefix += "/v1"
        return cls(parts.scheme, parts.hostname, port, prefix, api_key)

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.prefix}"


def _request_bytes(endpoint: Endpoint, method: str, path: str, body: dict | None, stream: bool) -> bytes:
    payload = b"" if body is None else json.dumps(body).encode()
    host = endpoint.host if ":" not in endpoint.host else f"[{endpoint.host}]"
    lines = [
        f"{method} {endpoint.prefix}{path} HTTP/1.1",
        f"Host: {host}:{endpoint.port}",
        "User-Agent: blackwell-stack-verify",
        f"Accept: {'text/event-stream' if stream else 'application/json'}",
        "Connection: close",
    ]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    if endpoint.api_key:
        lines.append(f"Authorization: Bearer {endpoint.api_key}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


class _ChunkedDecoder:
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
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size line {buf[pos:eol][:40]!r}") from None
            pos = eol + 2
            if size == 0:
                self.done = True
                break
            self._remaining = size
        self._buf = buf[pos:] if not self.done else b""
        return b"".join(out)


class SSEParser:
    """Splits an SSE byte stream into the JSON payloads of its `data:` fields.

    feed() returns the decoded events of the complete blocks seen so far;
    `done` turns true at `data: [DONE]`.
    """

    def __init__(self) -> None:
        self._buf = b""
        self.done = False

    def feed(self, data: bytes) -> list:
        if self._buf:
            data = self._buf + data
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        blocks = data.split(b"\n\n")
        self._buf = blocks.pop()
        events = []
        loads = json.loads
        for block in blocks:
            if not block:
                continue
            if block.startswith(b"data: ") and b"\n" not in block:
                payload = block[6:]  # the common case: one data line
            else:
                payload = b"\n".join(
                    line[5:].lstrip(b" ") for line in block.split(b"\n") if line.startswith(b"data:")
                )
                if not payload:
                    continue  # comments (": ping") and event/id/retry fields only
            if payload == b"[DONE]":
                self.done = True
                continue
            try:
                events.append(loads(payload))
            except ValueError:
                raise ProtocolError(f"SSE data is not JSON: {payload[:120]!r}") from None
        return events


async def _open(endpoint: Endpoint):
    ctx = ssl.create_default_context() if endpoint.scheme == "https" else None
    try:
        return await asyncio.open_connection(endpoint.host, endpoint.port, ssl=ctx, limit=_READ_SIZE)
    except OSError as exc:
        raise ConnectionError(f"cannot connect to {endpoint.host}:{endpoint.port}: {exc}") from exc


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        raise ProtocolError(f"connection closed before the HTTP headers ended ({len(exc.partial)} bytes)") from None
    return _parse_head(head)


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ProtocolError(f"not an HTTP status line: {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def _iter_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[tuple[float, bytes]]:
    """Yields (arrival time, body bytes) per socket read."""
    clock = time.perf_counter
    if "chunked" in headers.get("transfer-encoding", "").lower():
        decoder = _ChunkedDecoder()
        while not decoder.done:
            data = await reader.read(_READ_SIZE)
            if not data:
                raise ProtocolError("connection closed in the middle of a chunked body")
            payload = decoder.feed(data)
            if payload:
                yield clock(), payload
        return
    length = headers.get("content-length")
    left = int(length) if length and length.isdigit() else None
    while left is None or left > 0:
        data = await reader.read(_READ_SIZE if left is None else min(left, _READ_SIZE))
        if not data:
            if left:
                raise ProtocolError(f"connection closed with {left} body bytes missing")
            return
        if left is not None:
            left -= len(data)
        yield clock(), data


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        await writer.wait_closed()
    except (OSError, ssl.SSLError):
        pass


async def request_json(endpoint: Endpoint, method: str, path: str, body: dict | None = None) -> dict:
    """One request with a JSON answer. Raises ConnectionError, HTTPStatusError or ProtocolError."""
    reader, writer = await _open(endpoint)
    try:
        writer.write(_request_bytes(endpoint, method, path, body, stream=False))
        await writer.drain()
        status, headers = await _read_head(reader)
        data = b"".join([chunk async for _, chunk in _iter_body(reader, headers)])
    finally:
        await _close(writer)
    text = data.decode("utf-8", errors="replace")
    if not 200 <= status < 300:
        raise HTTPStatusError(status, text)
    try:
        return json.loads(text)
    except ValueError:
        raise ProtocolError(f"answer is not JSON: {text[:200]!r}") from None


class _SSEProtocol(asyncio.BufferedProtocol):
    """Reads one streamed answer straight from the socket into a reused buffer.

    A BufferedProtocol with a callback, not a StreamReader with an async
    iterator: no 256 KiB allocation per recv, no future and no task switch
    per read. Each read is stamped on arrival and its complete events are
    handed to on_events at once.
    """

    def __init__(self, request: bytes, on_events: Callable[[float, list], None], done: asyncio.Future):
        self._request = request
        self._on_events = on_events
        self._done = done
        self._view = memoryview(bytearray(1 << 16))
        self._head = b""
        self._status: int | None = None
        self._chunked: _ChunkedDecoder | None = None
        self._left: int | None = None  # body bytes still due, when Content-Length is given
        self._error_body: list[bytes] = []
        self._parser = SSEParser()
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self._request)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        stamp = time.perf_counter()
        try:
            self._received(stamp, bytes(self._view[:nbytes]))
        except Exception as exc:  # noqa: BLE001 - every failure ends this request, and only it
            self._finish(exc)

    def _received(self, stamp: float, data: bytes) -> None:
        if self._done.done():
            return
        if self._status is None:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                if len(self._head) > 1 << 16:
                    raise ProtocolError("HTTP headers longer than 64 KiB")
                return
            self._status, headers = _parse_head(self._head[: end + 4])
            data, self._head = self._head[end + 4 :], b""
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self._chunked = _ChunkedDecoder()
            elif headers.get("content-length", "").isdigit():
                self._left = int(headers["content-length"])
        if self._chunked is not None:
            payload = self._chunked.feed(data)
            body_done = self._chunked.done
        else:
            payload = data
            if self._left is not None:
                self._left -= len(data)
            body_done = self._left is not None and self._left <= 0
        if not 200 <= self._status < 300:
            self._error_body.append(payload)
            if body_done:
                self._finish(HTTPStatusError(self._status, b"".join(self._error_body).decode("utf-8", "replace")))
            return
        if payload:
            events = self._parser.feed(payload)
            if events:
                self._on_events(stamp, events)
        if self._parser.done or body_done:
            self._finish(None)

    def eof_received(self) -> bool:
        self.connection_lost(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._done.done():
            return
        if self._status is None:
            self._finish(ProtocolError("connection closed before the HTTP headers ended"))
        elif not 200 <= self._status < 300:
            self._finish(HTTPStatusError(self._status, b"".join(self._error_body).decode("utf-8", "replace")))
        elif self._chunked is not None or self._left:
            self._finish(ProtocolError(f"connection closed in the middle of the body ({exc or 'EOF'})"))
        else:
            self._finish(None)  # a body delimited by the connection's end

    def _finish(self, exc: BaseException | None) -> None:
        if not self._done.done():
            if exc is None:
                self._done.set_result(None)
            else:
                self._done.set_exception(exc)
        if self.transport is not None:
            self.transport.close()


async def stream_events(endpoint: Endpoint, path: str, body: dict, on_events: Callable[[float, list], None]) -> None:
    """POST body (stream=true) and call on_events(arrival time, decoded SSE events) for each socket read.

    Returns at `data: [DONE]` or at the end of the body. Raises ConnectionError,
    HTTPStatusError (non-2xx), ProtocolError, or what on_events raised.
    """
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    request = _request_bytes(endpoint, "POST", path, body, stream=True)
    ctx = ssl.create_default_context() if endpoint.scheme == "https" else None
    try:
        transport, _ = await loop.create_connection(
            lambda: _SSEProtocol(request, on_events, done), endpoint.host, endpoint.port, ssl=ctx
        )
    except OSError as exc:
        raise ConnectionError(f"cannot connect to {endpoint.host}:{endpoint.port}: {exc}") from exc
    try:
        await done
    finally:
        transport.close()


async def first_model_id(endpoint: Endpoint) -> str:
    """The first model the server lists at /v1/models (SGLang lists exactly one)."""
    answer = await request_json(endpoint, "GET", "/models")
    models = answer.get("data") if isinstance(answer, dict) else None
    if not models or not isinstance(models[0], dict) or not models[0].get("id"):
        raise StackError(
            f"{endpoint.base_url}/models lists no model",
            "pass the model name with --model",
        )
    return str(models[0]["id"])


def describe_error(exc: BaseException) -> str:
    """One line for a transport or protocol failure, for verdicts and error counts."""
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}"
