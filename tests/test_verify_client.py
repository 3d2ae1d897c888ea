"""Wire-format pieces of the verify client: URL parsing, chunked decoding, SSE splitting."""

from __future__ import annotations

import pytest

from blackwell_stack.errors import StackError
from blackwell_stack.verify import events
from blackwell_stack.verify.client import Endpoint
from blackwell_stack.verify.wire import ChunkedDecoder, Limits, ProtocolError, SSEParser


@pytest.mark.parametrize(
    "url,base",
    [
        ("http://127.0.0.1:30000", "http://127.0.0.1:30000/v1"),
        ("http://127.0.0.1:30000/v1/", "http://127.0.0.1:30000/v1"),
        ("localhost:8000", "http://localhost:8000/v1"),
        ("https://example.org/proxy", "https://example.org:443/proxy/v1"),
        ("http://[::1]:30000", "http://[::1]:30000/v1"),
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


def _events_in_pieces(parser: SSEParser, stream: bytes, size: int) -> list[dict]:
    return [event for i in range(0, len(stream), size) for event in parser.feed(stream[i : i + size])]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_chunked_decoder_any_split(size):
    body = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n"
    decoder = ChunkedDecoder()
    assert _feed_in_pieces(decoder, body, size) == b"hello, world"
    assert decoder.done


def test_chunked_decoder_bad_size():
    with pytest.raises(ProtocolError):
        ChunkedDecoder().feed(b"zz\r\n")


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
    assert _events_in_pieces(parser, stream, size) == [{"a": 1}, {"b": 2}]
    assert parser.done


def test_sse_parser_rejects_non_json():
    with pytest.raises(ProtocolError):
        SSEParser().feed(b"data: NaN happened{\n\n")


@pytest.mark.parametrize("size", [1, 2, 3, 5, 4096])
def test_sse_parser_handles_crlf_split_across_reads(size):
    stream = b'data: {"a": 1}\r\n\r\ndata: {"b": 2}\r\r: c\r\n\r\ndata: [DONE]\r\n\r\n'
    parser = SSEParser()
    assert _events_in_pieces(parser, stream, size) == [{"a": 1}, {"b": 2}]
    assert parser.done


def test_sse_parser_keeps_an_event_across_many_reads_and_caps_its_size():
    parser = SSEParser(max_event_bytes=1000)
    text = "x" * 900
    event = b'data: {"t": "' + text.encode() + b'"}\n\n'
    assert _events_in_pieces(parser, event, 7) == [{"t": text}]
    with pytest.raises(ProtocolError, match="longer than 1000 bytes"):
        for i in range(0, 2000, 100):
            parser.feed(b'data: {"t": "' if i == 0 else b"y" * 100)


def test_sse_parser_rejects_events_that_are_not_objects():
    with pytest.raises(ProtocolError, match="not a JSON object"):
        SSEParser().feed(b"data: 5\n\n")


def test_limits_follow_max_tokens():
    small, big = Limits.for_request({"max_tokens": 8}), Limits.for_request({"max_tokens": 4096})
    assert small.event_bytes < big.event_bytes and small.body_bytes < big.body_bytes
    assert small.event_bytes < 100_000
    assert Limits.for_request({}).body_bytes == Limits.for_request(None).body_bytes


@pytest.mark.parametrize("event", [
    {"error": {"message": "out of memory"}},
    {"choices": {"delta": {"content": "x"}}},
    {"choices": ["x"]},
    {"choices": [{"finish_reason": None}]},  # a chat choice without its delta
    {"choices": [{"delta": {"content": 7}}]},
])
def test_smoke_and_bench_refuse_the_same_stream_events(event):
    """One reader of OpenAI stream events (verify/events.py) for both: the same events are refused, with the event
    quoted."""
    with pytest.raises(ProtocolError):
        events.stream_event(event, chat=True)


def test_a_stream_event_gives_each_choices_text_reasoning_finish_and_the_usage():
    choices, usage = events.stream_event({"choices": [{"delta": {"reasoning_content": "hm"}, "finish_reason": None},
                                                      {"delta": {"content": "ok"}, "finish_reason": "stop"}],
                                          "usage": {"completion_tokens": 2}}, chat=True)
    assert [(c.content, c.reasoning, c.finish_reason) for c in choices] == [(None, "hm", None), ("ok", None, "stop")]
    assert events.completion_tokens(usage) == 2
    (text,), none = events.stream_event({"choices": [{"text": "a", "finish_reason": None}]}, chat=False)
    assert text.content == "a" and none is None
