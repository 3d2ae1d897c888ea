"""`serve pin-model` against a stand-in of the Hugging Face API on loopback, started here.

The stand-in answers as the Hub does to what huggingface_hub's HfApi asks
(src/huggingface_hub/hf_api.py): `GET /api/models/{repo}/revision/{rev}`
gives the model's info with its commit as `sha` (HfApi.model_info), and
`GET /api/models/{repo}/tree/{commit}?recursive=true` a page of entries
(`type`, `oid`, `size`, `path`, and `lfs` {`oid`: the content's sha256,
`size`, `pointerSize`} for a file in LFS), the next page named by a
`Link: <...>; rel="next"` header (HfApi.list_repo_tree, utils/_pagination.py).
"""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from blackwell_stack.cli import main

REPO_ID = "nvidia/Qwen3.5-397B-A17B-NVFP4"  # the default profile's model
COMMIT = hashlib.sha1(b"a commit").hexdigest()
SHARD = hashlib.sha256(b"a safetensors shard").hexdigest()
CONFIG_BLOB = hashlib.sha1(b"blob 2\x00{}").hexdigest()  # git's blob id of a two-byte config.json
PAGE_1 = [
    {"type": "file", "oid": CONFIG_BLOB, "size": 2, "path": "config.json"},
    {"type": "directory", "oid": hashlib.sha1(b"a tree").hexdigest(), "size": 0, "path": "extra"},
]
PAGE_2 = [
    {"type": "file", "oid": hashlib.sha1(b"pointer").hexdigest(), "size": 5_000_000_000,
     "lfs": {"oid": SHARD, "size": 5_000_000_000, "pointerSize": 135}, "path": "model-00001-of-00001.safetensors"},
]


class HubStandIn(BaseHTTPRequestHandler):
    requests: ClassVar[list[tuple[str, str | None]]] = []  # what each request asked, and its Authorization
    revision_answer: ClassVar[dict | None] = None

    def do_GET(self):
        HubStandIn.requests.append((self.path, self.headers.get("Authorization")))
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == f"/api/models/{REPO_ID}/revision/main":
            answer = HubStandIn.revision_answer or {"_id": "6650", "id": REPO_ID, "sha": COMMIT,
                                                   "siblings": [{"rfilename": "config.json"}]}
            return self._json(answer)
        if url.path == f"/api/models/{REPO_ID}/tree/{COMMIT}" and query.get("recursive") == ["true"]:
            if query.get("cursor") == ["2"]:
                return self._json(PAGE_2)
            return self._json(PAGE_1, link=f'<{url.path}?recursive=true&cursor=2>; rel="next"')
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        body = b'{"error":"Repository not found"}'
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, data, link: str | None = None):
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if link:
            self.send_header("Link", link)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def hub(monkeypatch):
    HubStandIn.requests = []
    HubStandIn.revision_answer = None
    monkeypatch.delenv("HF_TOKEN", raising=False)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), HubStandIn)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_the_manifest_holds_the_commit_and_every_files_hash_across_pages(hub, tmp_path, capsys):
    out = tmp_path / "profile.model.json"
    assert main(["serve", "pin-model", "--endpoint", hub, "--out", str(out)]) == 0
    manifest = json.loads(out.read_text())
    assert (manifest["model"], manifest["revision"], manifest["asked"]) == (REPO_ID, COMMIT, "main")
    assert manifest["files"] == {
        "config.json": {"size": 2, "git_blob": CONFIG_BLOB},
        "model-00001-of-00001.safetensors": {"size": 5_000_000_000, "sha256": SHARD},
    }
    # The tree was read at the commit, never at the moving branch.
    assert [p for p, _ in HubStandIn.requests][1:] == [f"/api/models/{REPO_ID}/tree/{COMMIT}?recursive=true",
                                                       f"/api/models/{REPO_ID}/tree/{COMMIT}?recursive=true&cursor=2"]
    text = capsys.readouterr().out
    assert f"commit {COMMIT}" in text and f'services.sglang.model.revision = "{COMMIT}"' in text
    assert "2 files (1 with their sha256 from LFS" in text


def test_a_token_is_sent_when_set(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    assert main(["serve", "pin-model", "--endpoint", hub, "--out", str(tmp_path / "m.json")]) == 0
    assert {auth for _, auth in HubStandIn.requests} == {"Bearer hf_test"}


def test_an_unknown_revision_is_a_network_error_naming_the_fix_and_writes_nothing(hub, tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["serve", "pin-model", "--endpoint", hub, "--revision", "no-such-branch", "--out", str(out)]) == 4
    err = capsys.readouterr().err
    assert "HTTP 404" in err and "hint: check the repository id and the revision" in err
    assert not out.exists()


def test_an_endpoint_that_is_not_the_hub_is_refused(hub, tmp_path, capsys):
    HubStandIn.revision_answer = {"id": REPO_ID, "sha": "main"}
    out = tmp_path / "m.json"
    assert main(["serve", "pin-model", "--endpoint", hub, "--out", str(out)]) == 4
    err = capsys.readouterr().err
    assert "names no 40-hex commit" in err and "hint: check --endpoint" in err
    assert not out.exists()


def test_the_manifest_goes_beside_the_profiles_not_among_them():
    """modules/profiles/ holds only profiles (each of its JSON files is read as one)."""
    from pathlib import Path

    from blackwell_stack.serve.model_pin import manifest_path

    assert manifest_path(Path("/r/modules/profiles/p.json")) == Path("/r/modules/models/p.json")
    assert manifest_path(Path("/elsewhere/p.json")) == Path("/elsewhere/p.model.json")
