"""download(): a file appears only whole and as pinned, and a download says what it is where no bar can show.

A real HTTP server on loopback serves a body whole, one cut short of the
Content-Length it announces (urllib returns such a body as if it were whole),
and one whose length is not the one the index or lock gives."""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from blackwell_stack.download import download
from blackwell_stack.errors import ExitCode, HashMismatch, NetworkError

BODY = b"0123456789" * 1000


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        announced = len(BODY) * 2 if self.path == "/short.whl" else len(BODY)
        self.send_response(200)
        self.send_header("Content-Length", str(announced))
        self.end_headers()
        self.wfile.write(BODY)
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_whole_download_is_kept_and_said_in_one_line_where_no_bar_shows(server, tmp_path, capsys):
    dest = tmp_path / "whole.whl"
    digest = download(f"{server}/whole.whl", dest, expected_sha256=hashlib.sha256(BODY).hexdigest(),
                      expected_size=len(BODY))
    assert dest.read_bytes() == BODY and digest == hashlib.sha256(BODY).hexdigest()
    # stderr is not a terminal here: no bar, one line that says what is downloaded and how much.
    assert capsys.readouterr().err == f"downloading whole.whl (9.8 KiB) from {server.split('//')[1]}\n"


def test_a_body_cut_short_of_its_content_length_is_refused_and_nothing_is_written(server, tmp_path):
    with pytest.raises(NetworkError) as info:
        download(f"{server}/short.whl", tmp_path / "short.whl")
    assert f"announced {len(BODY) * 2} bytes and sent {len(BODY)}" in info.value.message
    assert info.value.hint and "nothing was written" in info.value.hint
    assert list(tmp_path.iterdir()) == []


def test_a_file_of_another_length_than_the_index_says_is_a_mismatch(server, tmp_path):
    with pytest.raises(HashMismatch) as info:
        download(f"{server}/whole.whl", tmp_path / "whole.whl", expected_size=len(BODY) + 1)
    assert info.value.code == ExitCode.HASH_MISMATCH
    assert f"{len(BODY)} bytes, but the index or lock says {len(BODY) + 1}" in info.value.message
    assert list(tmp_path.iterdir()) == []
