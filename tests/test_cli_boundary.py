"""The one exception boundary (cli/boundary.py): each class of what can escape a command, raised for real by the
code that raises it in use (the standard library's readers, the system), becomes one message and its exit code.

A new reader of outside bytes that raises something new lands in one of these classes; a class missing here is
what the next hostile input would find.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import tomllib
import urllib.parse
import zipfile

import pytest

from blackwell_stack.cli import boundary, main
from blackwell_stack.errors import ExitCode, StackError


def raised(call) -> BaseException:
    try:
        call()
    except BaseException as exc:
        return exc
    raise AssertionError("it did not raise")


def _encrypted_zip() -> zipfile.ZipFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("a.txt", "a")
    data = bytearray(buffer.getvalue())
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        data[data.find(signature) + offset] |= 1
    return zipfile.ZipFile(io.BytesIO(bytes(data)))


def _incomplete_read() -> None:
    response = http.client.HTTPResponse(_Socket(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"))
    response.begin()
    response.read()


class _Socket:
    def __init__(self, data: bytes):
        self._data = data

    def makefile(self, mode: str) -> io.BytesIO:
        return io.BytesIO(self._data)


CLASSES = {
    # the standard library's readers of outside bytes: exit 2, named by what they read
    "zip, encrypted member": (lambda: _encrypted_zip().read("a.txt"), ExitCode.USAGE, "a zip archive (wheel)"),
    "JSON": (lambda: json.loads("{"), ExitCode.USAGE, "JSON that cannot be read"),
    "TOML": (lambda: tomllib.loads("a = "), ExitCode.USAGE, "TOML that cannot be read"),
    "URL": (lambda: urllib.parse.urlsplit("http://[::1"), ExitCode.USAGE, "a URL that cannot be read"),
    "host name": (lambda: "a..b".encode("idna"), ExitCode.USAGE, "a host name"),
    # an HTTP answer cut short: the network's
    "HTTP answer": (_incomplete_read, ExitCode.NETWORK, "an HTTP answer that cannot be read: IncompleteRead"),
    # nesting and size
    "deep nesting": (lambda: json.loads("[" * 100_000 + "]" * 100_000), ExitCode.USAGE, "nested too deeply"),
    # the system, by errno
    "no such file": (lambda: open("/nonexistent/x"), ExitCode.USAGE, "No such file or directory: /nonexistent/x"),
    "full disk": (lambda: _write_full(), ExitCode.USAGE, "free space on that disk"),
    "refused": (lambda: _refused(), ExitCode.NETWORK, "network error: Connection refused"),
    # ours
    "a bug": (lambda: None.missing, ExitCode.INTERNAL, "internal error: AttributeError"),  # type: ignore[attr-defined]
    "project error": (lambda: _raise(StackError("what", "fix")), ExitCode.USAGE, "what\n  hint: fix"),
}


def _raise(exc: BaseException) -> None:
    raise exc


def _write_full() -> None:
    with open("/dev/full", "wb", buffering=0) as fh:
        fh.write(b"x")


def _refused() -> None:
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]  # bound, never listening: a connection is refused
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_each_class_is_one_message_and_its_code(name):
    call, code, fragment = CLASSES[name]
    if name == "full disk" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    failure = boundary.describe(raised(call))
    assert failure.code == code, failure
    assert fragment in failure.message, failure.message
    assert "Traceback" not in failure.message and "hint: " in failure.message


def test_a_gzip_format_error_is_the_reader_not_the_system():
    import gzip

    exc = raised(lambda: gzip.decompress(b"not gzip"))
    assert isinstance(exc, OSError) and exc.errno is None
    failure = boundary.describe(exc)
    assert failure.code == ExitCode.USAGE and failure.message.startswith("gzip data that cannot be read")


def test_the_cli_prints_the_boundary_and_the_traceback_only_when_asked(monkeypatch, capsys):
    def broken(args):
        raise KeyError("a bug")

    monkeypatch.setattr(*_plan_func(), broken)
    assert main(["plan"]) == ExitCode.INTERNAL
    said = capsys.readouterr().err
    assert said.startswith("error: internal error: KeyError: 'a bug'") and "Traceback" not in said
    monkeypatch.setenv(boundary.TRACEBACK_ENV, "1")
    with pytest.raises(KeyError):
        main(["plan"])


def _plan_func():
    """Where `plan`'s parser finds its function (the module and the attribute), to replace it with a bug."""
    from blackwell_stack.cli import build_parser

    func = build_parser().parse_args(["plan"]).func
    return __import__(func.__module__, fromlist=["_"]), func.__name__
