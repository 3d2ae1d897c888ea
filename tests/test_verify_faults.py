"""smoke against broken servers on loopback (verify_server.FaultServer): bounded, no traceback.

Each run is a real CLI process with a wall-clock bound far above what the
command needs, so a client that hangs fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from support.verify_server import HUGE_EVENT_BYTES, FaultServer, free_port

from blackwell_stack.errors import ExitCode

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
BOUND_S = 120  # a hang fails the test here; the commands below need a few seconds
# Runs the CLI and reports the process's peak resident memory (KiB) on stderr's last line: VmHWM
# of its own address space (getrusage's ru_maxrss would count the forking parent's memory too).
_WITH_PEAK_RSS = (
    "import sys\n"
    "from blackwell_stack.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "peak = next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
    "print('peak-rss-kib', peak, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def cli(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-c", _WITH_PEAK_RSS, *argv], capture_output=True, text=True,
                          env=env, timeout=BOUND_S)


def peak_rss_mib(result: subprocess.CompletedProcess) -> float:
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("peak-rss-kib"), result.stderr
    return int(line.split()[1]) / 1024


def assert_clean_failure(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == ExitCode.CHECK_FAILED, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    text = result.stdout + result.stderr
    for needle in needles:
        assert needle in text, (needle, text[-3000:])


@pytest.fixture(scope="module")
def silent():
    with FaultServer("silent") as server:
        yield server.url


@pytest.fixture(scope="module")
def stall():
    with FaultServer("stall") as server:
        yield server.url


def test_smoke_model_listing_is_bounded_by_timeout(silent):
    result = cli("smoke", silent, "--timeout", "1")
    assert_clean_failure(result, "cannot list models", "timed out", "hint:")


def test_smoke_stops_asking_after_a_request_that_times_out(stall):
    """A server that never answers costs one --timeout, not one per request: the other seven are not asked."""
    result = cli("smoke", stall, "--model", "m", "--timeout", "1", "--max-tokens", "4", "--json")
    assert_clean_failure(result)
    verdicts = json.loads(result.stdout)["verdicts"]
    assert len(verdicts) == 8
    assert "timed out" in verdicts[0]["excerpt"] and verdicts[0]["detail"] == "no answer within --timeout"
    assert {v["check"] for v in verdicts[1:]} == {"not-asked"}
    assert all("capital (no-stream) within --timeout 1 s" in v["detail"] for v in verdicts[1:])


def test_a_huge_sse_event_is_refused_with_bounded_memory():
    with FaultServer("huge-event") as server:
        result = cli("smoke", server.url, "--model", "m", "--max-tokens", "8", "--json")
    assert_clean_failure(result)
    verdicts = json.loads(result.stdout)["verdicts"]
    assert any("longer than" in v["excerpt"] for v in verdicts), verdicts
    # The server offered a 256 MiB event; the client kept at most its cap (a few MiB).
    assert peak_rss_mib(result) < HUGE_EVENT_BYTES / (1 << 20) / 2


def test_nan_answers_fail_smoke():
    with FaultServer("nan") as server:
        smoke = cli("smoke", server.url, "--json")
    assert_clean_failure(smoke)
    report = json.loads(smoke.stdout)
    assert {v["check"] for v in report["verdicts"]} == {"failure-text", "finish-reason", "empty-content"}
    assert any("NaN happened" in v["detail"] for v in report["verdicts"])


def test_a_server_without_models_or_without_the_api_is_a_failed_check(tmp_path):
    """An empty model list and an HTTP 404 (a plain file server) are the same kind of failure: exit 1."""
    with FaultServer("no-models") as server:
        assert_clean_failure(cli("smoke", server.url), "lists no model", "--model")
    port = free_port()
    files = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory",
                              str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_port(port)
        assert_clean_failure(cli("smoke", url), "cannot list models", "HTTP 404")
    finally:
        files.terminate()
        files.wait(timeout=30)
    # Nothing listening at all: the same code.
    assert_clean_failure(cli("smoke", f"http://127.0.0.1:{free_port()}"), "cannot list models", "cannot connect")


def wait_for_port(port: int) -> None:
    for _ in range(200):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


@pytest.mark.parametrize("fault,checks", [
    ("same-answer", {"same-answer"}),
    ("wrong-answer", {"wrong-answer"}),
])
def test_smoke_fails_a_server_that_does_not_answer_the_question(fault, checks):
    """Sound text is not enough: one sentence for every prompt, or fluent wrong answers, fail smoke."""
    with FaultServer(fault) as server:
        result = cli("smoke", server.url, "--json")
    assert_clean_failure(result)
    report = json.loads(result.stdout)
    assert {v["check"] for v in report["verdicts"]} == checks
    if fault == "wrong-answer":  # the capital and the count are wrong; the two completions are fine
        assert {v["prompt"] for v in report["verdicts"]} == {"capital", "count"}
        assert any("Paris" in v["detail"] for v in report["verdicts"])


def test_smoke_passes_the_answers_it_expects_and_shows_each_step():
    with FaultServer("sound") as server:
        result = cli("smoke", server.url)
    assert result.returncode == ExitCode.OK, result.stdout + result.stderr
    assert "smoke passed: 8 answers" in result.stdout
    # Not a terminal: a line per request on stderr, as it ends.
    steps = [line for line in result.stderr.splitlines() if line.startswith("smoke: ")]
    assert len(steps) == 8 and steps[0].startswith("smoke: capital (no-stream): ok (")
