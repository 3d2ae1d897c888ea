"""Wire-format pieces of the verify client: URL parsing, chunked decoding, SSE splitting."""

from __future__ import annotations

import pytest

from blackwell_stack.errors import StackError
from blackwell_stack.verify.client import Endpoint


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

