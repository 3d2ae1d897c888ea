"""A real package index on loopback for the pins tests: real wheels built with
setuptools, served over HTTP as PEP 503 HTML or PEP 691 JSON."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def build_wheel(workdir: Path, name: str, version: str, *, requires: list[str] = (), python_tag="cp312",
                plat_name="manylinux_2_28_x86_64", payload: str = "") -> Path:
    """Build a real wheel with setuptools (through pip, no isolation)."""
    src = workdir / f"src-{name}-{version}-{python_tag}-{plat_name}".replace("+", "_")
    pkg = src / name.replace("-", "_")
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n{payload}")
    lines = [
        "[metadata]", f"name = {name}", f"version = {version}",
        "[options]", f"packages = {name.replace('-', '_')}", "install_requires =", *[f"    {r}" for r in requires],
        "[bdist_wheel]", f"python_tag = {python_tag}", f"plat_name = {plat_name}",
    ]
    (src / "setup.cfg").write_text("\n".join(lines) + "\n")
    (src / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    out = workdir / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
                   check=True, capture_output=True)
    return next(out.glob(f"{name.replace('-', '_')}-{version}-*.whl"))


@dataclass
class Index:
    """Serves {project: [wheel paths]} at /simple/<project>/ and the files at /files/<name>."""

    projects: dict[str, list[Path]] = field(default_factory=dict)
    style: str = "html"  # "html" (PEP 503, like PyTorch's nightly index) or "json" (PEP 691)
    publish_hashes: bool = False
    wrong_hash_for: set[str] = field(default_factory=set)  # file names whose published sha256 is wrong
    url: str = ""

    def _sha(self, path: Path) -> str:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        return "0" * 63 + "1" if path.name in self.wrong_hash_for else digest

    def page(self, project: str) -> tuple[str, bytes]:
        files = self.projects.get(project)
        if files is None:
            return "", b""
        if self.style == "json":
            body = {"meta": {"api-version": "1.0"}, "name": project, "files": [
                {"filename": p.name, "url": f"/files/{urllib.parse.quote(p.name)}",
                 "hashes": {"sha256": self._sha(p)} if self.publish_hashes else {}} for p in files]}
            return "application/vnd.pypi.simple.v1+json", json.dumps(body).encode()
        links = []
        for p in files:
            href = f"/files/{urllib.parse.quote(p.name)}"
            if self.publish_hashes:
                href += f"#sha256={self._sha(p)}"
            links.append(f'<a href="{href}">{p.name}</a><br/>')
        return "text/html", ("<!DOCTYPE html><html><body>" + "\n".join(links) + "</body></html>").encode()

    def file(self, name: str) -> Path | None:
        for files in self.projects.values():
            for p in files:
                if p.name == name:
                    return p
        return None


def serve(index: Index):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep test output clean
            pass

        def do_GET(self):
            path = urllib.parse.unquote(self.path.split("?")[0])
            if path.startswith("/simple/"):
                ctype, body = index.page(path[len("/simple/"):].strip("/"))
            elif path.startswith("/files/"):
                f = index.file(path[len("/files/"):])
                ctype, body = ("application/octet-stream", f.read_bytes()) if f else ("", b"")
            else:
                ctype, body = "", b""
            if not ctype:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    index.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


def serve_fixed(body: bytes, *, status: int = 200, content_type: str = "application/json"):
    """A server on loopback that answers every GET with the same status and body (an index gone wrong, an empty
    mirror); its base URL is `server.url`. Stop it with shutdown()."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
