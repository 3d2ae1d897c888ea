"""Wire-format pieces of the verify client: URL parsing, chunked decoding, SSE splitting."""

from __future__ import annotations

import pytest

from blackwell_stack.errors import StackError
from blackwell_stack.verify.openai_client import Endpoint, ProtocolError, SSEParser, _ChunkedDecoder


@pytest.mark.parametrize(
    "url,base",
    [
        ("http://127.0.0.1:30000", "http://127.0.0.1:30000/v1"),
        ("http://127.0.0.1:30000/v1/", "http://127.0.0.1:30000/v1"),
        ("localhost:8000", "http://localhost:8000/v1"),
        ("https://example.org/proxy", "https://example.org:443/proxy/v1"),
        ("http://[::1]:30000", "http://::1:30000/v1"),
    ],
)
def test_endpoint_parse(url, base):
    assert Endpoint.parse(url).base_url == base


@pytest.mark.parametrize("url", ["ftp://host", "http://", "http://host:99999"])
def test_endpoint_parse_rejects_with_a_hint(url):
    with pytest.raises(StackError) as err:
        Endpoint.parse(url)
    assert err.value.hint


def _feed_in_pieces(decoder, data: bytes, size: int) -> bytes:
    return b"".join(decoder.feed(data[i : i + size]) for i in range(0, len(data), size))


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_chunked_decoder_any_split(size):
    body = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n"
    decoder = _ChunkedDecoder()
    assert _feed_in_pieces(decoder, body, size) == b"hello, world"
    assert decoder.done


def test_chunked_decoder_bad_size():
    with pytest.raises(ProtocolError):
        _ChunkedDecoder().feed(b"zz\r\n")


@pytest.mark.parametrize("size", [1, 5, 64, 4096])
def test_sse_parser_any_split(size):
    stream = (
        b": ping\n\n"
        b'data: {"a": 1}\n\n'
        b'data: {"b":\r\ndata: 2}\r\n\r\n'
        b"event: x\nid: 3\n\n"
        b"data: [DONE]\n\n"
    )
    parser = SSEParser()
    events = []
    for i in range(0, len(stream), size):
        events += parser.feed(stream[i : i + size])
    assert events == [{"a": 1}, {"b": 2}]
    assert parser.done


def test_sse_parser_rejects_non_json():
    with pytest.raises(ProtocolError):
        SSEParser().feed(b"data: NaN happened{\n\n")
