"""A small client of an OpenAI-compatible server (SGLang, vLLM, transformers serve) on http.client.

Standard library only, so that it runs wherever the CLI runs. Nothing a server sends is trusted to be small or
quick: every request has a deadline (connecting and each read included), an answer is read up to a size that its
max_tokens explains, and an answer that is not the OpenAI format is a ServerError that quotes it.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from blackwell_stack import argtypes
from blackwell_stack.errors import CheckFailed, StackError

# An error page is kept up to this size (it is only shown).
ERROR_BODY_LIMIT = 64 << 10
# The model listing is one small answer: not the minutes a bench level or a question may take.
LISTING_TIMEOUT_S = 60.0


def answer_limit(body: dict | None) -> int:
    """The most bytes an answer may have: 8 KiB per token asked (text, logprobs, SSE framing) plus 1 MiB."""
    tokens = (body or {}).get("max_tokens")
    return (1 << 20) + (8 << 10) * (tokens if isinstance(tokens, int) and tokens > 0 else 1024)


class ServerError(Exception):
    """A request that got no sound answer. kind: connect, timeout, http, dropped or protocol."""

    def __init__(self, kind: str, message: str, status: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = status


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
        hint = "give the server's base URL, e.g. http://127.0.0.1:30000 or http://[::1]:30000 (/v1 is optional)"
        try:
            parts = urlsplit(url if "://" in url else f"http://{url}")
        except ValueError as exc:  # an unclosed [ of an IPv6 address: "Invalid IPv6 URL"
            raise StackError(f"not a server URL: {url!r} ({exc})", hint) from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise StackError(f"not a server URL: {url!r}", hint)
        problem = argtypes.host_name_problem(parts.hostname)
        if problem:
            raise StackError(f"not a server URL: {url!r}: the host name {parts.hostname!r} is not valid ({problem})",
                             hint)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise StackError(f"bad port in {url!r}: {exc}", "use a port number between 1 and 65535") from None
        prefix = parts.path.rstrip("/").removesuffix("/v1") + "/v1"
        return cls(parts.scheme, parts.hostname, port, prefix, api_key)

    @property
    def root(self) -> str:  # the base URL bench_serving wants
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.prefix.removesuffix('/v1')}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"


class _Request:
    """One request on its own connection, every socket operation bounded by what is left of `timeout`."""

    def __init__(self, endpoint: Endpoint, method: str, path: str, body: dict | None, timeout: float):
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.what = f"{method} {endpoint.base_url}{path}"
        cls = http.client.HTTPSConnection if endpoint.scheme == "https" else http.client.HTTPConnection
        self.conn = cls(endpoint.host, endpoint.port, timeout=timeout)
        payload = None if body is None else json.dumps(body).encode()
        headers = {"User-Agent": "blackwell-stack", "Accept": "application/json, text/event-stream",
                   **({"Content-Type": "application/json"} if payload is not None else {}),
                   **({"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {})}
        try:
            self.conn.request(method, endpoint.prefix + path, body=payload, headers=headers)
            self.response = self.conn.getresponse()
        except TimeoutError:
            self.close()
            raise self.timed_out() from None
        except OSError as exc:  # refused, reset, a name not found, TLS (each an OSError)
            self.close()
            kind = "dropped" if isinstance(exc, http.client.RemoteDisconnected) else "connect"
            raise ServerError(kind, f"cannot connect to {endpoint.host}:{endpoint.port}: {exc}") from None
        except http.client.HTTPException as exc:
            self.close()
            raise ServerError("protocol", f"{self.what}: not an HTTP answer ({type(exc).__name__}: {exc})") from None

    def timed_out(self) -> ServerError:
        return ServerError("timeout", f"timed out: {self.what}: no complete answer within {self.timeout:g} s")

    def read(self, call, *args):
        """response.call(*args) within the deadline."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.timed_out()
        if self.conn.sock is not None:
            self.conn.sock.settimeout(left)
        try:
            return call(*args)
        except TimeoutError:
            raise self.timed_out() from None
        except http.client.IncompleteRead as exc:
            raise ServerError("dropped", f"the connection closed {len(exc.partial)} bytes into the answer") from None
        except (http.client.HTTPException, ValueError) as exc:  # ValueError: a bad chunk size line
            raise ServerError("dropped" if "closed" in str(exc) else "protocol",
                              f"{self.what}: broken HTTP body ({type(exc).__name__}: {exc})") from None
        except OSError as exc:
            raise ServerError("dropped", f"{self.what}: the connection failed mid-answer: {exc}") from None

    def check_status(self) -> None:
        status = self.response.status
        if not 200 <= status < 300:
            text = self.read(self.response.read, ERROR_BODY_LIMIT).decode("utf-8", "replace")
            raise ServerError("http", f"HTTP {status}: {text[:300]}", status)

    def close(self) -> None:
        self.conn.close()


def json_object(payload: bytes, what: str) -> dict:
    try:
        data = json.loads(payload)
    except ValueError:
        raise ServerError("protocol", f"{what} is not JSON: {payload[:120]!r}") from None
    if not isinstance(data, dict):
        raise ServerError("protocol", f"{what} is not a JSON object: {payload[:120]!r}")
    return data


def get_json(endpoint: Endpoint, method: str, path: str, body: dict | None = None, *, timeout: float) -> dict:
    """One request whose answer is a JSON object of at most answer_limit(body) bytes."""
    with contextlib.closing(_Request(endpoint, method, path, body, timeout)) as request:
        request.check_status()
        limit = answer_limit(body)
        data = request.read(request.response.read, limit + 1)
        if len(data) > limit:
            raise ServerError("protocol", f"the answer is longer than the {limit} bytes this request can need")
        if request.response.length:  # what its Content-Length promised and did not come
            raise ServerError("dropped", f"the connection closed {len(data)} bytes into the answer, "
                              f"{request.response.length} bytes short")
        return json_object(data, "the answer")


def stream_events(endpoint: Endpoint, path: str, body: dict, *, timeout: float, into: list[dict]) -> None:
    """POST body (stream: true) and append each SSE event, a JSON object, to `into` until `data: [DONE]`.

    The events read before a failure stay in `into` (the text so far of an
    answer cut short). A stream that ends without `data: [DONE]` was cut.
    """
    with contextlib.closing(_Request(endpoint, "POST", path, body, timeout)) as request:
        request.check_status()
        limit, size, data = answer_limit(body), 0, b""
        while True:
            line = request.read(request.response.readline, limit + 1)
            if not line:
                # A chunked or sized body that ended early is http.client's IncompleteRead; one delimited by the
                # connection's end is whole only with `data: [DONE]`.
                if request.response.chunked or request.response.length is not None:
                    if data:
                        into.append(json_object(data, "an SSE event"))
                    return
                raise ServerError("dropped", f"the stream ended after {size} bytes without its `data: [DONE]`")
            size += len(line)
            if size > limit:
                raise ServerError("protocol", f"the streamed answer is longer than the {limit} bytes its "
                                  "max_tokens can need")
            if not line.endswith(b"\n"):
                raise ServerError("dropped", f"the stream was cut in the middle of a line after {size} bytes")
            line = line.rstrip(b"\r\n")
            if line.startswith(b"data:"):
                data += line[5:].lstrip(b" ")
                if data == b"[DONE]":  # uvicorn may close the stream right after it, without a blank line
                    return
            elif not line and data:  # a blank line ends an event
                into.append(json_object(data, "an SSE event"))
                data = b""


def first_model_id(endpoint: Endpoint, *, timeout: float) -> str:
    """The first model the server lists at /v1/models (SGLang lists exactly one)."""
    try:
        answer = get_json(endpoint, "GET", "/models", timeout=timeout)
    except ServerError as exc:
        raise CheckFailed(f"cannot list models at {endpoint.base_url}/models: {exc}",
                          "check that the server is up at that URL, or pass --model") from None
    models = answer.get("data")
    if not isinstance(models, list) or not models or not isinstance(models[0], dict) or not models[0].get("id"):
        raise CheckFailed(f"{endpoint.base_url}/models lists no model", "pass the model name with --model")
    return str(models[0]["id"])
