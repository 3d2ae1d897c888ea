"""The unit's own commands, run for real, without systemd.

services.sglang is evaluated with the real nixpkgs lib (tests/support/module_eval.py);
its ExecStart and ExecStartPost lines are split as systemd splits them and run
in order, with the unit's environment and PATH, $MAINPID and
$CREDENTIALS_DIRECTORY as systemd sets them. The package is the stand-in SGLang
of the VM test (modules/tests/stand-in-sglang) behind a `bin/python3` wrapper,
as the VM test builds it; the smoke test is this checkout's blackwell-stack.

What systemd does with the exit statuses (stop the unit, restart or not) is
what modules/tests/sglang-vm.nix shows in a VM; here: that the gates pass a good
server, fail a garbage, a never-ready and a dead one with the reason, and that
the key reaches the server and not its command line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support.module_eval import REPO, evaluate_one, exec_argv, host, nixpkgs_lib  # noqa: F401  (fixture)
from support.verify_server import free_port

pytestmark = pytest.mark.nix

KEY = "sk-unit-run-0123456789"


def wrapper(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.fixture
def rig(tmp_path):
    env = tmp_path / "env"  # "a Python environment with SGLang"
    wrapper(env / "bin" / "python3",
            f'export PYTHONPATH={REPO}/modules/tests/stand-in-sglang\nexec {sys.executable} "$@"\n')
    cli = tmp_path / "cli"
    wrapper(cli / "bin" / "blackwell-stack", f'export PYTHONPATH={REPO}/src\nexec {sys.executable} -m blackwell_stack "$@"\n')
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "api-key").write_text(KEY + "\n")
    (tmp_path / "state").mkdir()
    return tmp_path


def unit_for(nix, lib_dir, rig: Path, *settings: str) -> dict:
    package = (
        f'standIn.package "stand-in-sglang" "{rig}/env" {{ passthru.blackwellStack = {{ '
        f'versions = {{ inherit ((lib.importJSON {REPO}/modules/profiles/qwen3.5-397b-a17b-nvfp4-sm120.json).runtime) sglang flashinfer; }}; '
        f'cudaHome = "{rig}/cuda"; cc = standIn.package "cc" "/usr" {{ }}; }}; }}'
    )
    text = host(
        "services.sglang.requireNvidiaDriver = false;",
        f"services.sglang.port = {free_port()};",
        f'services.sglang.user = "sglang"; services.sglang.stateDir = "{rig}/state";',
        'services.sglang.apiKeyFile = "/run/keys/sglang-api-key";',
        "services.sglang.readiness.intervalSec = 1;",
        f'services.sglang.smokeTest = {{ enable = true; package = standIn.package "cli" "{rig}/cli" {{ }}; '
        "maxTokens = 16; timeout = 20; };",
        *settings,
        package=package,
        nvidia=False,
    )
    result = evaluate_one(nix, lib_dir, text, rig)
    assert result["failedAssertions"] == [], result["failedAssertions"]
    return result["unit"]


class Run:
    """ExecStart, then each ExecStartPost in order until one fails, as systemd runs them."""

    def __init__(self, unit: dict, rig: Path):
        self.unit, self.rig = unit, rig
        self.credentials = str(rig / "credentials")
        self.env = {
            **unit["environment"],
            "PATH": ":".join(f"{p}/bin" for p in unit["path"]) + ":/usr/bin:/bin",
            "CREDENTIALS_DIRECTORY": self.credentials,
        }
        self.log = open(rig / "server.log", "w")
        self.server = subprocess.Popen(exec_argv(unit["serviceConfig"]["ExecStart"]), env=self.env,
                                       cwd=unit["serviceConfig"]["WorkingDirectory"], stdout=self.log, stderr=subprocess.STDOUT)

    def post(self) -> list[subprocess.CompletedProcess]:
        done = []
        for line in self.unit["serviceConfig"]["ExecStartPost"]:
            argv = exec_argv(line, credentials=self.credentials)
            result = subprocess.run(argv, env={**self.env, "MAINPID": str(self.server.pid)},
                                    capture_output=True, text=True, timeout=300)
            done.append(result)
            if result.returncode != 0:
                break
        return done

    def stop(self) -> None:
        if self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.server.kill()
        self.log.close()


@pytest.fixture
def run(rig):
    runs = []

    def start(unit):
        r = Run(unit, rig)
        runs.append(r)
        return r

    yield start
    for r in runs:
        r.stop()


def get(url: str, key: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_good_server_passes_both_gates_with_the_key_from_the_credential(nix, nixpkgs_lib, rig, run):
    unit = unit_for(nix, nixpkgs_lib, rig, 'services.sglang.environment = { STAND_IN_ANSWERS = "good"; STAND_IN_LOAD_SECONDS = "1"; };')
    r = run(unit)
    readiness, smoke = r.post()
    assert readiness.returncode == 0 and "answered 200" in readiness.stdout
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    assert "smoke passed" in smoke.stdout
    argv = exec_argv(unit["serviceConfig"]["ExecStart"])
    base = f"http://127.0.0.1:{argv[argv.index('--port') + 1]}"
    assert get(f"{base}/v1/models") == 401
    assert get(f"{base}/v1/models", KEY) == 200
    cmdline = Path(f"/proc/{r.server.pid}/cmdline").read_bytes().decode()
    assert KEY not in cmdline and "--api-key" not in cmdline
    assert "sglang-launcher.py" in cmdline


def test_the_smoke_gate_fails_a_garbage_server_with_its_report(nix, nixpkgs_lib, rig, run):
    unit = unit_for(nix, nixpkgs_lib, rig, 'services.sglang.environment = { STAND_IN_ANSWERS = "garbage"; STAND_IN_LOAD_SECONDS = "1"; };')
    readiness, smoke = run(unit).post()
    assert readiness.returncode == 0
    assert smoke.returncode == 1
    assert "smoke failed" in smoke.stdout and "char-run" in smoke.stdout


def test_the_readiness_gate_gives_up_after_its_timeout_with_the_reason(nix, nixpkgs_lib, rig, run):
    unit = unit_for(nix, nixpkgs_lib, rig, 'services.sglang.environment.STAND_IN_LOAD_SECONDS = "3600";',
                    "services.sglang.readiness.timeoutSec = 2;")
    start = time.monotonic()
    (readiness,) = run(unit).post()  # the smoke test does not run
    assert readiness.returncode == 1
    assert "did not answer 200 within 2 s (services.sglang.readiness.timeoutSec)" in readiness.stderr
    assert time.monotonic() - start < 30


def test_the_readiness_gate_stops_waiting_when_the_server_is_gone(nix, nixpkgs_lib, rig, run):
    # The launcher refuses to start (an empty key file), as a crashing server exits.
    (rig / "credentials" / "api-key").write_text("\n")
    unit = unit_for(nix, nixpkgs_lib, rig)
    r = run(unit)
    r.server.wait(timeout=30)
    (readiness,) = r.post()
    assert readiness.returncode == 1
    assert "exited before" in readiness.stderr
    assert "credential api-key" in (rig / "server.log").read_text()


def test_no_unit_command_holds_a_secret_or_a_shell(nix, nixpkgs_lib, rig):
    unit = unit_for(nix, nixpkgs_lib, rig)
    lines = [unit["serviceConfig"]["ExecStart"], *unit["serviceConfig"]["ExecStartPost"]]
    for line in lines:
        argv = exec_argv(line, credentials="/run/credentials/sglang.service")
        assert os.path.isabs(argv[0]), argv
        assert KEY not in line and "--api-key " not in line
