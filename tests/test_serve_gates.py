"""The readiness gate (serve/readiness.py) and the VM test's stand-in SGLang, run for real.

The stand-in (modules/tests/stand-in-sglang) is started through the real
launcher with a credentials directory, as the unit starts SGLang; the gate and
`blackwell-stack smoke` then judge it as the unit's ExecStartPost lines do
(test_serve_unit_run.py runs those exact lines from the evaluated module).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from support import REPO
from support.verify_server import free_port

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

READINESS = REPO / "src" / "blackwell_stack" / "serve" / "readiness.py"
LAUNCHER = REPO / "src" / "blackwell_stack" / "serve" / "launcher.py"
KEY = "sk-gates-0123456789"


@pytest.fixture
def stand_in(tmp_path):
    procs = []

    def start(answers: str, load_seconds: str = "0.5") -> tuple[subprocess.Popen, str]:
        credentials = tmp_path / "credentials"
        credentials.mkdir(exist_ok=True)
        (credentials / "api-key").write_text(KEY + "\n")
        port = free_port()
        env = {**os.environ, "PYTHONPATH": str(REPO / "modules" / "tests" / "stand-in-sglang"),
               "STAND_IN_ANSWERS": answers, "STAND_IN_LOAD_SECONDS": load_seconds,
               "CREDENTIALS_DIRECTORY": str(credentials)}
        proc = subprocess.Popen([sys.executable, str(LAUNCHER), "--model-path", "nvidia/Qwen3.5-397B-A17B-NVFP4",
                                 "--host", "127.0.0.1", "--port", str(port), "--tensor-parallel-size", "8"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        return proc, f"http://127.0.0.1:{port}"

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def readiness(url: str, timeout: float, pid: int | None) -> subprocess.CompletedProcess:
    env = {**os.environ}
    env.pop("MAINPID", None)
    if pid is not None:
        env["MAINPID"] = str(pid)
    return subprocess.run([sys.executable, str(READINESS), "--url", f"{url}/health", "--timeout", str(timeout),
                           "--interval", "0.2"], env=env, capture_output=True, text=True, timeout=120)


def smoke(url: str, key: str | None) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "blackwell_stack", "smoke", url, "--max-tokens", "16", "--timeout", "20"]
    if key:
        args += ["--api-key", key]
    return subprocess.run(args, env={**os.environ, "PYTHONPATH": str(REPO / "src")}, capture_output=True, text=True, timeout=120)


def test_readiness_waits_for_a_loading_server(stand_in):
    proc, url = stand_in("good", load_seconds="1.5")
    result = readiness(url, 30, proc.pid)
    assert result.returncode == 0 and "answered 200" in result.stdout


def test_readiness_gives_up_at_its_timeout(stand_in):
    proc, url = stand_in("good", load_seconds="3600")
    start = time.monotonic()
    result = readiness(url, 1.5, proc.pid)
    assert result.returncode == 1
    assert "did not answer 200 within 2 s" in result.stderr and "not restarted" in result.stderr
    assert time.monotonic() - start < 20


def test_readiness_stops_when_the_server_is_gone(stand_in):
    proc, url = stand_in("good", load_seconds="3600")
    proc.kill()
    proc.wait()
    result = readiness(url, 60, proc.pid)
    assert result.returncode == 1 and "exited before" in result.stderr


def test_readiness_without_a_server_and_without_mainpid_times_out():
    result = readiness(f"http://127.0.0.1:{free_port()}", 0.5, None)
    assert result.returncode == 1 and "did not answer 200" in result.stderr


def test_the_stand_in_answers_well_or_garbage_and_wants_the_key(stand_in):
    good, good_url = stand_in("good")
    garbage, garbage_url = stand_in("garbage")
    assert readiness(good_url, 30, good.pid).returncode == 0
    assert readiness(garbage_url, 30, garbage.pid).returncode == 0
    passed = smoke(good_url, KEY)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    failed = smoke(garbage_url, KEY)
    assert failed.returncode == 1 and "smoke failed" in failed.stdout
    refused = smoke(good_url, None)
    assert refused.returncode != 0 and "401" in refused.stderr
