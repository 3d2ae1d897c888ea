"""Real wheels built with setuptools, and a server on loopback that answers every request the same way."""

from __future__ import annotations

import subprocess
import sys
import threading
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
