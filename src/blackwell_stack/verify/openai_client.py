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

Nothing a server sends is trusted to be small or quick: every request runs
under a timeout (connecting, sending and reading included), and an answer's
size is capped from the request's own max_tokens (`Limits`), both the whole
body and each SSE event, so that a broken or hostile server can neither hang
the client nor fill its memory.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

from blackwell_stack import argtypes
from blackwell_stack.download import content_length
from blackwell_stack.errors import CheckFailed, StackError
from blackwell_stack.verify.wire import ChunkedDecoder, ConnectionDropped, Limits, ProtocolError, SSEParser, json_object

T = TypeVar("T")

_READ_SIZE = 1 << 18
# An HTTP error's body is kept up to this size (it is only shown to the user).
_ERROR_BODY_LIMIT = 64 << 10


class RequestTimeout(TimeoutError):
    """No complete answer within the request's timeout."""


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
    def parse(cls, url: str, api_key: str | None = None) -> Endpoint:
        """http://host:port, http://host:port/v1 or https://host/prefix/v1 -> Endpoint."""
        raw = url if "://" in url else f"http://{url}"
        try:
            parts = urlsplit(raw)
        except ValueError as exc:  # an unclosed [ of an IPv6 address: "Invalid IPv6 URL"
            raise StackError(f"not a server URL: {url!r} ({exc})",
                             "give the server's base URL, for example http://127.0.0.1:30000 or http://[::1]:30000") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise StackError(
                f"not a server URL: {url!r}",
                "give the server's base URL, for example http://127.0.0.1:30000 (the /v1 prefix is optional)",
            )
        problem = argtypes.host_name_problem(parts.hostname)
        if problem:
            raise StackError(f"not a server URL: {url!r}: the host name {parts.hostname!r} is not valid ({problem})",
                             "give the server's base URL, for example http://127.0.0.1:30000")
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


async def _open(endpoint: Endpoint) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    ctx = ssl.create_default_context() if endpoint.scheme == "https" else None
    try:
        return await asyncio.open_connection(endpoint.host, endpoint.port, ssl=ctx, limit=_READ_SIZE)
    except OSError as exc:
        raise ConnectionError(f"cannot connect to {endpoint.host}:{endpoint.port}: {exc}") from exc


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        raise ConnectionDropped(f"connection closed before the HTTP headers ended ({len(exc.partial)} bytes)") from None
    except asyncio.LimitOverrunError:
        raise ProtocolError(f"HTTP headers longer than {_READ_SIZE} bytes") from None
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
        decoder = ChunkedDecoder()
        while not decoder.done:
            data = await reader.read(_READ_SIZE)
            if not data:
                raise ConnectionDropped("connection closed in the middle of a chunked body")
            payload = decoder.feed(data)
            if payload:
                yield clock(), payload
        return
    left = content_length(headers.get("content-length"))
    while left is None or left > 0:
        data = await reader.read(_READ_SIZE if left is None else min(left, _READ_SIZE))
        if not data:
            if left:
                raise ConnectionDropped(f"connection closed with {left} body bytes missing")
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


async def _within(awaitable: Awaitable[T], timeout: float, what: str) -> T:
    """awaitable, or RequestTimeout once `timeout` seconds have passed."""
    if not timeout > 0:
        raise ValueError(f"timeout must be positive, not {timeout!r}")
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except TimeoutError:
        raise RequestTimeout(f"{what}: no complete answer within {timeout:g} s") from None


async def request_json(
    endpoint: Endpoint, method: str, path: str, body: dict | None = None, *, timeout: float, max_bytes: int | None = None
) -> dict:
    """One request with a JSON answer, all of it within `timeout` seconds.

    The answer may be at most max_bytes (default: Limits.for_request(body)).
    Raises ConnectionError, RequestTimeout, HTTPStatusError or ProtocolError.
    """
    limit = max_bytes or Limits.for_request(body).body_bytes
    return await _within(_request_json(endpoint, method, path, body, limit), timeout, f"{method} {endpoint.base_url}{path}")


async def _request_json(endpoint: Endpoint, method: str, path: str, body: dict | None, limit: int) -> dict:
    reader, writer = await _open(endpoint)
    try:
        writer.write(_request_bytes(endpoint, method, path, body, stream=False))
        await writer.drain()
        status, headers = await _read_head(reader)
        length = content_length(headers.get("content-length"))
        if length is not None and length > limit and 200 <= status < 300:
            raise ProtocolError(f"the answer is {length} bytes, more than the {limit} this request can need")
        keep = limit if 200 <= status < 300 else _ERROR_BODY_LIMIT
        parts: list[bytes] = []
        size = 0
        async for _, chunk in _iter_body(reader, headers):
            parts.append(chunk)
            size += len(chunk)
            if size > keep:
                if keep == _ERROR_BODY_LIMIT:
                    break  # enough of an error page to show
                raise ProtocolError(f"the answer is longer than the {limit} bytes this request can need")
    finally:
        await _close(writer)
    text = b"".join(parts)[:keep].decode("utf-8", errors="replace")
    if not 200 <= status < 300:
        raise HTTPStatusError(status, text)
    return json_object(text, "answer")


class _SSEProtocol(asyncio.BufferedProtocol):
    """Reads one streamed answer straight from the socket into a reused buffer.

    A BufferedProtocol with a callback, not a StreamReader with an async
    iterator: no 256 KiB allocation per recv, no future and no task switch
    per read. Each read is stamped on arrival and its complete events are
    handed to on_events at once.
    """

    def __init__(self, request: bytes, on_events: Callable[[float, list[dict]], None], done: asyncio.Future,
                 limits: Limits):
        self._request = request
        self._on_events = on_events
        self._done = done
        self._view = memoryview(bytearray(1 << 16))
        self._head = b""
        self._status: int | None = None
        self._chunked: ChunkedDecoder | None = None
        self._left: int | None = None  # body bytes still due, when Content-Length is given
        self._error_body: list[bytes] = []
        self._error_size = 0
        self._body_size = 0
        self._body_limit = limits.body_bytes
        self._parser = SSEParser(limits.event_bytes)
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(self._request)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        stamp = time.perf_counter()
        try:
            self._received(stamp, bytes(self._view[:nbytes]))
        except Exception as exc:
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
                self._chunked = ChunkedDecoder()
            else:
                self._left = content_length(headers.get("content-length"))
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
            self._error_size += len(payload)
            if body_done or self._error_size >= _ERROR_BODY_LIMIT:  # enough of an error page to show
                self._finish(HTTPStatusError(self._status, self._error_text()))
            return
        self._body_size += len(payload)
        if self._body_size > self._body_limit:
            raise ProtocolError(f"the streamed answer is longer than the {self._body_limit} bytes its max_tokens can need")
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
            self._finish(ConnectionDropped("connection closed before the HTTP headers ended"))
        elif not 200 <= self._status < 300:
            self._finish(HTTPStatusError(self._status, self._error_text()))
        elif self._chunked is not None or self._left:
            self._finish(ConnectionDropped(f"connection closed in the middle of the stream after {self._body_size} "
                                           f"bytes ({exc or 'EOF'})"))
        elif not self._parser.done:
            # A body delimited by the connection's end: only `data: [DONE]` says that the stream is whole.
            self._finish(ConnectionDropped(f"connection closed after {self._body_size} bytes of the stream, before "
                                           f"its `data: [DONE]` ({exc or 'EOF'})"))
        else:
            self._finish(None)

    def _error_text(self) -> str:
        return b"".join(self._error_body)[:_ERROR_BODY_LIMIT].decode("utf-8", "replace")

    def _finish(self, exc: BaseException | None) -> None:
        if not self._done.done():
            if exc is None:
                self._done.set_result(None)
            else:
                self._done.set_exception(exc)
        if self.transport is not None:
            self.transport.close()


async def stream_events(
    endpoint: Endpoint, path: str, body: dict, on_events: Callable[[float, list[dict]], None], *, timeout: float
) -> None:
    """POST body (stream=true) and call on_events(arrival time, decoded SSE events) for each socket read.

    Returns at `data: [DONE]` or at the end of the body; the whole stream must
    end within `timeout` seconds, and its size stays within
    Limits.for_request(body). Raises ConnectionError, RequestTimeout,
    HTTPStatusError (non-2xx), ProtocolError, or what on_events raised.
    """
    return await _within(_stream(endpoint, path, body, on_events), timeout, f"POST {endpoint.base_url}{path}")


async def _stream(endpoint: Endpoint, path: str, body: dict, on_events: Callable[[float, list[dict]], None]) -> None:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    request = _request_bytes(endpoint, "POST", path, body, stream=True)
    limits = Limits.for_request(body)
    ctx = ssl.create_default_context() if endpoint.scheme == "https" else None
    try:
        transport, _ = await loop.create_connection(
            lambda: _SSEProtocol(request, on_events, done, limits), endpoint.host, endpoint.port, ssl=ctx
        )
    except OSError as exc:
        raise ConnectionError(f"cannot connect to {endpoint.host}:{endpoint.port}: {exc}") from exc
    try:
        await done
    finally:
        transport.close()


async def first_model_id(endpoint: Endpoint, *, timeout: float) -> str:
    """The first model the server lists at /v1/models (SGLang lists exactly one)."""
    answer = await request_json(endpoint, "GET", "/models", timeout=timeout)
    models = answer.get("data")
    if not isinstance(models, list) or not models or not isinstance(models[0], dict) or not models[0].get("id"):
        raise CheckFailed(
            f"{endpoint.base_url}/models lists no model",
            "pass the model name with --model",
        )
    return str(models[0]["id"])


def describe_error(exc: BaseException) -> str:
    """One line for a transport or protocol failure, for verdicts and error counts."""
    if isinstance(exc, RequestTimeout):
        return f"timed out: {exc}"
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}"
