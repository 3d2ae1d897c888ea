"""Interrupts unwind the command: Ctrl-C stops a thread pool's queue and its running jobs, SIGTERM ends a download
with its partial file removed and the signal's exit code (cli/__init__.py, parallel.py)."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.cli import start

from blackwell_stack import parallel


def test_an_interrupt_cancels_the_queue_and_stops_the_running_jobs():
    started: list[int] = []
    release = threading.Event()

    def job(item: int) -> int:
        started.append(item)
        if item == 0:
            raise KeyboardInterrupt  # the Ctrl-C, in the first result waited for
        while not release.is_set():  # a long download: it checks between blocks
            parallel.check()
            time.sleep(0.01)
        return item

    with pytest.raises(KeyboardInterrupt):
        parallel.run_all(job, range(100), jobs=4)
    release.set()
    # The four workers, and the next item the one that raised may have taken before the queue was cancelled.
    assert len(started) <= 5, started
    parallel.check()  # the next command's jobs are not stopped


class _Stalling(BaseHTTPRequestHandler):
    """Promises 10 MiB, sends 3 MiB (more than one block the download reads), then nothing until the test ends:
    a download in progress."""

    hold = threading.Event()

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(10 << 20))
        self.end_headers()
        self.wfile.write(b"\0" * (3 << 20))
        self.wfile.flush()
        self.hold.wait(300)


@pytest.fixture
def stalling_server():
    _Stalling.hold = threading.Event()  # each test's server stalls until its own end
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stalling)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    _Stalling.hold.set()
    server.shutdown()
    server.server_close()


def _partial_files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*.part") if p.is_file() and p.stat().st_size > 0]


@pytest.mark.proc
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_a_download_removes_the_partial_file(tmp_path, stalling_server, signum):
    sources = tmp_path / "sources"
    child = _downloading(sources, stalling_server)
    child.send_signal(signum)
    _out, err = child.communicate(timeout=120)
    assert child.returncode == 128 + signum, err
    assert f"terminated ({signal.Signals(signum).name})" in err and "Traceback" not in err
    assert not list(sources.rglob("*.part")) and not [p for p in sources.rglob(".*") if p.is_dir()]


@pytest.mark.proc
def test_a_signal_ignored_at_start_stays_ignored(tmp_path, stalling_server):
    """Under `nohup` (SIGHUP ignored) the command, once running, still ignores the hang-up and still catches SIGTERM,
    as the kernel keeps them (/proc/PID/status); the SIGTERM then ends it as usual."""
    sources = tmp_path / "sources"
    child = _downloading(sources, stalling_server, ignored=(signal.SIGHUP,))
    ignored, caught = _dispositions(child.pid)
    child.send_signal(signal.SIGTERM)
    _out, err = child.communicate(timeout=120)
    assert signal.SIGHUP in ignored and signal.SIGHUP not in caught and signal.SIGTERM in caught
    assert child.returncode == 128 + signal.SIGTERM, err
    assert "terminated (SIGTERM)" in err and not list(sources.rglob("*.part"))


def _dispositions(pid: int) -> tuple[set[int], set[int]]:
    """The signals a process ignores and the ones it catches, from its SigIgn and SigCgt masks."""
    fields = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)
    def members(mask: str) -> set[int]:
        return {n for n in range(1, 65) if int(mask, 16) >> (n - 1) & 1}
    return members(fields["SigIgn"]), members(fields["SigCgt"])


def _downloading(sources: Path, server: str, ignored: tuple[signal.Signals, ...] = ()) -> subprocess.Popen:
    """`kernel sources fetch` from the stalling server, once its first partial file is on disk."""
    child = start("kernel", "sources", "fetch", "--dir", str(sources), "--all", "--github", server, ignored=ignored)
    deadline = time.monotonic() + 120  # a bound for a broken run, not a timing assumption
    while not (sources.is_dir() and _partial_files(sources)) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child.poll() is None, child.communicate()
    assert _partial_files(sources), "the download never started"
    return child
